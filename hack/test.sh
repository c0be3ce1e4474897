#!/usr/bin/env bash
# The project's test command (`make test`): builds or finds the real servers, checks
# formatting, vet, lint (hack/lint.sh) and generated files (hack/verify.sh), then runs
# every test. Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each step says what it took, so that a run's time can be read step by step.
began_all=$SECONDS
step() {
  local name=$1 began=$SECONDS
  shift
  "$@"
  echo "test: $name took $((SECONDS - began)) s" >&2
}

began=$SECONDS
assets_line=$(hack/test-binaries.sh | tail -n 1)
echo "test: servers took $((SECONDS - began)) s" >&2
case "$assets_line" in
  KSP_TEST_ASSETS=*) export "$assets_line" ;;
  *) echo "test: hack/test-binaries.sh did not report the test binaries" >&2; exit 1 ;;
esac
echo "test: servers from $KSP_TEST_ASSETS" >&2

# Every go command below (vet, the tests, the builds the tests and make generate run)
# compiles with -trimpath: without it Go's build cache keys each package of this
# repository by its folder, so a fresh clone in a new folder (as CI's) compiled every
# package again even with a warm cache. With it, the key is the module path.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^hack/tools/') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "test: gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
step vet go vet ./...
step lint hack/lint.sh
step verify hack/verify.sh

# A brief fuzz of name derivation and spec.kcp validation (about 20 s in all; their seed
# corpora also run in the go test below). A failure leaves its input in testdata/fuzz.
# The budget is a count of executions, not a duration: Go 1.26's fuzz coordinator can
# report a duration's expiry as a failure ("context deadline exceeded", golang/go#75804,
# fixed in Go 1.27); it did so once in a CI run here on 2026-12-01.
step fuzz-kcp go test -run '^$' -fuzz FuzzValidateKCP -fuzztime 150000x ./api/v1alpha1/
step fuzz-names go test -run '^$' -fuzz FuzzIdentityNames -fuzztime 20000x ./cluster/

# Packages start kcp and kube-apiservers of their own. Three at a time (and the
# migration suite beside them): at two, the cores were 57 % busy over the tests of a
# warm run (2026-12-06), most packages waiting on their servers, the operator and
# grants; at three 73 %, and the tests took 780 s against 961 s. The three longest
# (3-10 min each) go first, so that the slots end together rather than one of them
# starting the longest last.
slow=(./test/e2e-kcp ./test/e2e-faults ./test/e2e-binary)
mod=$(go list -m)
rest=$(go list ./... | grep -vxF -e "$mod/test/e2e-kcp" -e "$mod/test/e2e-faults" -e "$mod/test/e2e-binary")
# The test binaries are linked without DWARF (-s -w: a third less linker time for the
# 45 of them; stack traces keep their file and line). gotestsum runs go test -json: a line per package as it ends, a failing test's output
# (with its servers' logs) as it fails, and at the end the packages by time, the slowest
# tests and the names of the failures, which a CI page shows last.
gotestsum=$(hack/tools.sh gotestsum)
# KSP_TEST_RESULTS keeps the JSON of the run in a folder of one's choice.
if [ -n "${KSP_TEST_RESULTS:-}" ]; then
  results=$KSP_TEST_RESULTS
  mkdir -p "$results"
else
  results=$(mktemp -d)
  trap 'rm -rf "$results"' EXIT
fi
status=0
# The migration suite is a module of its own (it links opencontrolplane-runtime, which
# the product module must not). It runs beside the other packages, started first: it
# waits on its servers and the operator more than it computes (the cores have room, as
# above), and alone after them it added 2.5 min. Its counts (requests
# and UIDs, workers, leftovers after the rollback) are printed at the end; its servers'
# logs only when it fails.
began=$SECONDS
(
  began=$SECONDS mstatus=0
  cd test/e2e-migration &&
    "$gotestsum" --format standard-verbose --hide-summary=skipped,output --jsonfile "$results/migration.json" -- \
      -count=1 -timeout 20m "$@" ./... >"$results/migration.log" 2>&1 || mstatus=$?
  echo "$((SECONDS - began))" >"$results/migration.took"
  exit "$mstatus"
) &
migration=$!
# shellcheck disable=SC2086 # rest is one package per word
"$gotestsum" --format pkgname-and-test-fails --hide-summary=skipped,output --jsonfile "$results/test.json" -- \
  -p 3 -timeout 45m -count=1 -ldflags='-s -w' "$@" "${slow[@]}" $rest || status=$?
tests_took=$((SECONDS - began))
mstatus=0
wait "$migration" || mstatus=$?
migration_took=$(cat "$results/migration.took" 2>/dev/null || echo "?")
if [ "$mstatus" -ne 0 ]; then
  cat "$results/migration.log"
  status=$mstatus
else
  grep -E '^[[:space:]]+migration_test\.go:[0-9]+:|^(--- |ok[[:space:]])' "$results/migration.log" || true
fi

summary() {
  echo
  echo "test: tests (building their binaries included) took $tests_took s, the migration suite beside them $migration_took s, the whole command $((SECONDS - began_all)) s"
  echo "test: packages by time (seconds):"
  cat "$results"/*.json | sed -nE 's/.*"Action":"(pass|fail)","Package":"([^"]*)","Elapsed":([0-9.]+)\}$/\3 \1 \2/p' |
    sort -rn | head -25 | awk '{printf "  %8.1f  %-4s  %s\n", $1, $2, $3}' || true
  echo "test: the slowest tests:"
  for f in "$results"/test.json "$results"/migration.json; do
    if [ -s "$f" ]; then "$gotestsum" tool slowest --jsonfile "$f" --threshold 20s; fi
  done | head -20 | sed 's/^/  /' || true
}
summary >&2
if [ "$status" -ne 0 ]; then
  echo "test: failed (exit $status):" >&2
  cat "$results"/*.json | sed -nE 's/.*"Action":"fail","Package":"([^"]*)","Test":"([^"]*)".*/  --- FAIL: \2 (\1)/p' >&2 || true
fi
exit "$status"
