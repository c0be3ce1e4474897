#!/usr/bin/env bash
# The project's test command (`make test`): builds or finds the real servers, checks
# formatting, vet, lint (hack/lint.sh) and generated files (hack/verify.sh), then runs
# every test. Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

assets_line=$(hack/test-binaries.sh | tail -n 1)
case "$assets_line" in
  KSP_TEST_ASSETS=*) export "$assets_line" ;;
  *) echo "test: hack/test-binaries.sh did not report the test binaries" >&2; exit 1 ;;
esac
echo "test: servers from $KSP_TEST_ASSETS" >&2

unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^hack/tools/') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "test: gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
hack/lint.sh
hack/verify.sh

# A brief fuzz of name derivation and spec.kcp validation (about 20 s in all; their seed
# corpora also run in the go test below). A failure leaves its input in testdata/fuzz.
# The budget is a count of executions, not a duration: Go 1.26's fuzz coordinator can
# report a duration's expiry as a failure ("context deadline exceeded", golang/go#75804,
# fixed in Go 1.27); it did so once in a CI run here on 2026-12-01.
go test -run '^$' -fuzz FuzzValidateKCP -fuzztime 150000x ./api/v1alpha1/
go test -run '^$' -fuzz FuzzIdentityNames -fuzztime 20000x ./cluster/

# Packages start kcp and kube-apiservers of their own; two at a time fit two cores.
# The three longest (5-14 min each) go first, so that the two slots end together
# rather than one of them starting the longest last.
slow=(./test/e2e-kcp ./test/e2e-faults ./test/e2e-binary)
mod=$(go list -m)
rest=$(go list ./... | grep -vxF -e "$mod/test/e2e-kcp" -e "$mod/test/e2e-faults" -e "$mod/test/e2e-binary")
# A failing test prints the logs of its servers after its "--- FAIL" line, and a CI
# page shows the end of the output: the names of the failures are repeated last.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
# shellcheck disable=SC2086 # rest is one package per word
go test -p 2 -timeout 45m -count=1 "$@" "${slow[@]}" $rest 2>&1 | tee "$out" || status=$?
# The migration suite is a module of its own (it links opencontrolplane-runtime, which
# the product module must not); it runs after the others, alone on the two cores. Its
# counts (requests and UIDs, workers, leftovers after the rollback) are printed; its
# servers' logs only when it fails.
mig=$(mktemp)
trap 'rm -f "$out" "$mig"' EXIT
mstatus=0
(cd test/e2e-migration && go test -count=1 -timeout 20m -v "$@" ./...) >"$mig" 2>&1 || mstatus=$?
if [ "$mstatus" -ne 0 ]; then
  tee -a "$out" <"$mig"
  status=$mstatus
else
  grep -E '^[[:space:]]+migration_test\.go:[0-9]+:|^(--- |ok[[:space:]])' "$mig" || true
fi
if [ "$status" -ne 0 ]; then
  echo "test: failed (go test exit $status):" >&2
  grep -E '^[[:space:]]*--- FAIL|^FAIL[[:space:]]|^panic: ' "$out" >&2 || true
fi
exit "$status"
