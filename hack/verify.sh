#!/usr/bin/env bash
# The project's generated-files check (`make verify`): runs `make generate` on a copy of
# the working tree and fails when that changes or adds any file, so DeepCopy methods,
# CRDs and the kcp manifests always match the Go types they come from. The copy keeps
# this independent of the checkout's own git state (uncommitted work is fine).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$copy"
cd "$copy"
git init -q && git add -A && git -c user.name=verify -c user.email=verify@localhost commit -qm base
make -s generate >/dev/null
changed=$(git status --porcelain)
if [ -n "$changed" ]; then
  echo "verify: make generate changes these files; run it and commit the result:" >&2
  echo "$changed" >&2
  git --no-pager diff --stat >&2
  exit 1
fi
echo "verify: generated files are up to date" >&2
