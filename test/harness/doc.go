// Package harness starts the real servers the integration and end-to-end tests of
// this project talk to: kcp (with embedded etcd) and plain Kubernetes API servers
// (etcd + kube-apiserver through controller-runtime's envtest) standing in for the
// openMCP platform, onboarding, workload and MCP clusters.
//
// Why real servers: the runtime's hard parts are the ones fakes get wrong - kcp
// workspaces, APIBindings and the APIExport virtual workspace, TokenRequest and
// RBAC, CRD validation. Every test here therefore runs against the same binaries a
// deployment would use. They are built from Go modules by hack/test-binaries.sh and
// found through the environment variable KSP_TEST_ASSETS (see [AssetsDir]); a test
// package's TestMain calls [Main], which stops with one clear line when they are
// missing.
//
// Lifetime: every server belongs to the test that started it and is stopped, and
// its files removed, by t.Cleanup. The harness also guarantees that no server
// outlives the test binary, even when it panics or is killed by `go test -timeout`:
// each server process is started from a goroutine whose OS thread stays locked for
// the child's lifetime, with the kernel's parent-death signal (Pdeathsig) set to
// SIGKILL, in its own process group. envtest starts etcd and kube-apiserver itself,
// so the harness hands it small wrapper scripts that set the same signal through
// setpriv(1) before executing the real binary. Files of a test binary that died
// without cleaning up are removed by the next [Main].
//
// Starting a server takes time (kcp about 30 s, an API server about 6 s on the
// machines here), so a test package usually starts one kcp in a parent test and
// runs its cases as subtests.
//
// Helpers fail the test (t.Fatal) instead of returning errors: call them from the
// test's goroutine.
package harness
