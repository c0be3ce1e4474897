# kcp-serviceprovider: the commands the README names.

.PHONY: test lint verify run generate binaries bench bench-upgrades image

## test: build (or reuse) the real test servers, gofmt, go vet, lint, verify, and every test.
test:
	hack/test.sh

## lint: golangci-lint (pinned in hack/tools/lint) with the linters .golangci.yml selects.
lint:
	hack/lint.sh

## verify: fail when `make generate` would change a generated file.
verify:
	hack/verify.sh

## run: start a local platform and the reference provider in both modes.
run:
	go run ./cmd/kcp-serviceprovider-local local

## generate: DeepCopy methods and CRDs from the Go API types, the reference
## provider's kcp schema, and the listing of the author packages' exported API
## (api/exported.txt), for review.
generate:
	$$(hack/tools.sh controller-gen) object paths=./api/... paths=./test/widget/...
	$$(hack/tools.sh controller-gen) crd paths=./test/widget/... output:crd:dir=./test/widget/crd
	$$(hack/tools.sh controller-gen) object paths=./test/ownresources/...
	$$(hack/tools.sh controller-gen) crd paths=./test/ownresources/... output:crd:dir=./test/ownresources/crd
	$$(hack/tools.sh controller-gen) object paths=./examples/echo/api/...
	$$(hack/tools.sh controller-gen) crd paths=./examples/echo/api/... output:crd:dir=./examples/echo/config/crd
	go run ./cmd/kcp-serviceprovider kcp-manifests > examples/echo/config/kcp/apiexport.yaml.tmp && mv examples/echo/config/kcp/apiexport.yaml.tmp examples/echo/config/kcp/apiexport.yaml
	$$(hack/tools.sh controller-gen) object paths=./internal/scaffold/template/api/...
	$$(hack/tools.sh controller-gen) crd paths=./internal/scaffold/template/api/... output:crd:dir=./internal/scaffold/template/crd
	$$(hack/tools.sh controller-gen) object paths=./examples/greeter/api/...
	$$(hack/tools.sh controller-gen) crd paths=./examples/greeter/api/... output:crd:dir=./examples/greeter/crd
	go run ./examples/greeter/cmd/greeter platform-rbac > examples/greeter/config/platform-rbac.yaml.tmp && mv examples/greeter/config/platform-rbac.yaml.tmp examples/greeter/config/platform-rbac.yaml
	go run ./hack/apilisting > api/exported.txt.tmp && mv api/exported.txt.tmp api/exported.txt

## binaries: build the test servers into the cache and print where they are.
binaries:
	hack/test-binaries.sh

## bench: measure kcp mode at 10/100/500 workspaces (the floor, cost per workspace, newcomers), and standard mode
## against opencontrolplane-runtime; writes docs/benchmarks.md (about 60 min on 2 cores).
## Override sizes with BENCH_ARGS, e.g. make bench BENCH_ARGS="-sizes 10 -steady 10s".
## BENCH_BASELINE=<rev> measures kcp mode and the runs of several replicas again with the runtime of that
## commit, in the same run: the old behaviour's rows (hack/bench-baseline.sh).
BENCH_ARGS ?= -sizes 10,100,500 -std-sizes 10,100
bench:
	export "$$(hack/test-binaries.sh | tail -1)" && cd test/bench && go run . -out ../../docs/benchmarks.md \
		$(if $(BENCH_BASELINE),-baseline "$$(cd ../.. && hack/bench-baseline.sh $(BENCH_BASELINE))") $(BENCH_ARGS)

## bench-upgrades: Service API upgrades: storage migration on the onboarding cluster
## (100 and 1000 objects, against the classic get-and-update migrator) and a schema move
## plus storage migration in kcp at 100 and 500 workspaces (about 15 min on 2 cores).
bench-upgrades:
	export "$$(hack/test-binaries.sh | tail -1)" && go test -run '^$$' -bench BenchmarkMigrate -benchtime 3x ./internal/storageversion/ && \
		KSP_BENCH_WORKSPACES=100,500 go test -run '^$$' -bench BenchmarkSchemaMove -benchtime 1x -timeout 60m ./apiexport/

## image: the reference provider's container image as an OCI layout in dist/image, built
## without a container daemon (cmd/kcp-serviceprovider-image): static binary, non-root, reproducible.
image:
	go run ./cmd/kcp-serviceprovider-image -main ./cmd/kcp-serviceprovider -out dist/image
