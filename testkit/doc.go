// Package testkit tests a service provider end to end, in both modes, on a whole local
// openMCP platform that the test starts itself: kcp, kube-apiservers for the platform,
// onboarding, workload and MCP clusters, the real openmcp-operator's scheduler and
// access-request controller, and the local stand-in for a cluster provider (real
// tokens and RBAC on the real servers). The provider's runtime runs in the test
// process, built by the provider's own command.Provider, exactly as run builds it.
//
// A provider's e2e test is then its own logic and assertions:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
//	func TestEcho(t *testing.T) {
//		env := testkit.Start(t, testkit.Options{Provider: echo.Description(), Scheme: scheme, ProviderConfig: config})
//		for _, tn := range env.Tenants(t, "demo") { // one kcp workspace, one ControlPlane
//			t.Run(string(tn.Mode), func(t *testing.T) {
//				e := &v1alpha1.Echo{ObjectMeta: tn.ObjectMeta()}
//				tn.Create(t, e)
//				tn.WaitReady(t, e)
//				// ... assert on env.Workload and tn.EndUser ...
//				tn.DeleteAndExpectNoLeftovers(t, e)
//			})
//		}
//	}
//
// Each standard tenant's ControlPlane gets an MCP cluster of its own when
// Options.MCPClusters starts as many MCP API servers as the test has standard tenants
// (they take turns): tenants installing the same thing into the same namespace then do
// not meet there, as on openMCP. By default they share one.
//
// The servers are built once per machine by hack/test-binaries.sh, which prints the
// KSP_TEST_ASSETS variable the kit needs; without it Main says so and exits.
// examples/echo/e2e/echo_test.go is a whole test written with the kit.
package testkit
