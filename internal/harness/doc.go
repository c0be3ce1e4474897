// Package harness is the testing.T layer over internal/localenv, which starts the real
// servers the end-to-end tests talk to: kcp, Kubernetes API servers for the platform,
// onboarding, workload and MCP clusters, a whole local platform, helper processes.
//
// Real servers, because the runtime's hard parts are the ones fakes get wrong: kcp
// workspaces, APIBindings, the APIExport virtual workspace, TokenRequest, RBAC, CRD
// validation. hack/test-binaries.sh builds them; a package's TestMain calls [Main],
// which stops with one clear line when KSP_TEST_ASSETS is missing.
//
// What it adds to localenv: every server belongs to the test that started it, and
// t.Cleanup stops it (printing its logs' tail if the test failed), except a kcp from
// [SharedKCP] or a local platform from [SharedPlatform], which the package's tests
// share, each in a workspace of its own ([KCP.OwnWorkspace]) and with a provider of
// its own ([Platform.PrepareProvider]), and [Main] stops; errors fail the test, so
// call the helpers from the test's goroutine. It also holds the helpers the test
// packages share ([Eventually], [Background], [NewClient], [Patch],
// [DeleteAndWait], [ApplyYAML], [Scheme]). Why and how: docs/design/testkit.md
// and docs/design/shared-test-servers.md.
package harness
