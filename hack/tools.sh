#!/usr/bin/env bash
# Builds the small code tools (controller-gen) from hack/tools/codegen into the cache
# folder outside the repository and prints the path of the requested tool.
#   hack/tools.sh controller-gen
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KSP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider}
key=$(cat "$repo/hack/tools/codegen/go.mod" "$repo/hack/tools/codegen/go.sum" | sha256sum | cut -c1-16)
dir="$cache/codegen-$key"
case "${1:-}" in
  controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen ;;
  *) echo "usage: $0 controller-gen" >&2; exit 2 ;;
esac
if [ ! -x "$dir/$1" ]; then
  echo "tools: building $1 into $dir" >&2
  (cd "$repo/hack/tools/codegen" && GOFLAGS=-mod=mod go build -o "$dir/$1" "$pkg")
fi
echo "$dir/$1"
