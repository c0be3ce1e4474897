// Package harness is the testing.T layer over internal/localenv, which starts the real
// servers the integration and end-to-end tests of this project talk to: kcp (with
// embedded etcd) and plain Kubernetes API servers standing in for the openMCP
// platform, onboarding, workload and MCP clusters, a whole local platform, helper
// processes and proxies.
//
// Why real servers: the runtime's hard parts are the ones fakes get wrong - kcp
// workspaces, APIBindings and the APIExport virtual workspace, TokenRequest and
// RBAC, CRD validation. Every test here therefore runs against the same binaries a
// deployment would use. They are built from Go modules by hack/test-binaries.sh and
// found through the environment variable KSP_TEST_ASSETS; a test package's TestMain
// calls [Main], which stops with one clear line when they are missing.
//
// What the harness adds to localenv: every server belongs to the test that started
// it, and t.Cleanup stops it and removes its files, printing the tail of its logs
// first if the test failed; errors fail the test (t.Fatal), so call the helpers from
// the test's goroutine. [Main] removes the files of test binaries that died without
// cleaning up. localenv keeps servers from outliving the test binary.
//
// It also holds the helpers every test package shares: [Eventually], [Background],
// [NewClient], [Patch], [DeleteAndWait], [ApplyYAML], and [Scheme].
//
// Starting a server takes time (kcp about 30 s, an API server about 6 s on the
// machines here), so a test package usually starts one kcp in a parent test and
// runs its cases as subtests.
package harness
