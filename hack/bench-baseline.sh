#!/usr/bin/env bash
# Builds the benchmark command (test/bench) at an earlier commit and prints the
# binary's path, for the old behaviour's rows of a benchmark run:
#
#   make bench BENCH_BASELINE=<rev> BENCH_ARGS=...
#
# The benchmark then runs its runtime phases a second time with that binary's runtime
# (test/bench -baseline), on fresh servers, in the same run. The binary is cached by
# commit outside the repository.
#
#   KSP_CACHE_DIR   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider)
set -euo pipefail

rev=$(git rev-parse --short=7 "${1:?usage: hack/bench-baseline.sh <rev>}^{commit}")
cache=${KSP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kcp-serviceprovider}/bench-baseline
bin=$cache/bench-$rev
if [[ ! -x $bin ]]; then
	mkdir -p "$cache"
	tree=$(mktemp -d)
	trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"' EXIT
	git worktree add --detach "$tree" "$rev" >&2
	(cd "$tree/test/bench" && go build -o "$bin.tmp" .) >&2
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
