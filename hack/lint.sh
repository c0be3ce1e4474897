#!/usr/bin/env bash
# The project's lint (`make lint`): golangci-lint, built at the version hack/tools/lint
# pins, with the linters .golangci.yml selects, over every Go module of the repository;
# then hack/layers, the layer rule of docs/layout.md.
# Extra arguments go to golangci-lint run (for example --fix).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lint=$("$repo/hack/tools.sh" golangci-lint)
status=0
# The root module, then each nested module that holds code (the benchmark's, and the
# migration suite's, which link opencontrolplane-runtime).
for mod in . test/bench test/e2e-migration; do
  echo "lint: $mod" >&2
  (cd "$repo/$mod" && "$lint" run --config "$repo/.golangci.yml" "$@" ./...) || status=1
done
# The layer table of docs/layout.md against the code: imports run only down it.
echo "lint: layers (docs/layout.md, ## Layout)" >&2
(cd "$repo" && go run ./hack/layers) || status=1
exit $status
