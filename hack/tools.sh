#!/usr/bin/env bash
# Builds the project's code tools from their pinned modules under hack/tools/ into the
# cache folder outside the repository and prints the path of the requested tool. A tool
# is rebuilt only when its module's go.mod or go.sum changes.
#   hack/tools.sh controller-gen
#   hack/tools.sh golangci-lint
#   hack/tools.sh gotestsum
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KSP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider}
case "${1:-}" in
  controller-gen) mod=codegen pkg=sigs.k8s.io/controller-tools/cmd/controller-gen ;;
  golangci-lint) mod=lint pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint ;;
  gotestsum) mod=gotestsum pkg=gotest.tools/gotestsum ;;
  *) echo "usage: $0 controller-gen|golangci-lint|gotestsum" >&2; exit 2 ;;
esac
key=$(cat "$repo/hack/tools/$mod/go.mod" "$repo/hack/tools/$mod/go.sum" | sha256sum | cut -c1-16)
dir="$cache/$mod-$key"
if [ ! -x "$dir/$1" ]; then
  echo "tools: building $1 into $dir" >&2
  (cd "$repo/hack/tools/$mod" && GOFLAGS=-mod=mod go build -o "$dir/$1.tmp" "$pkg" && mv "$dir/$1.tmp" "$dir/$1")
fi
echo "$dir/$1"
