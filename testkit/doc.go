// Package testkit tests a service provider end to end, in both modes, on a whole local
// openMCP platform the test starts itself: kcp, API servers for the platform,
// onboarding, workload and MCP clusters, the real openmcp-operator, and the local
// stand-in for a cluster provider. The provider's runtime runs in the test process,
// built from its command.Provider exactly as run builds it:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
//	func TestEcho(t *testing.T) {
//		env := testkit.Start(t, testkit.Options{Provider: echo.Description(), Scheme: scheme, ProviderConfig: config})
//		for _, tn := range env.Tenants(t, "demo") { // one kcp workspace, one ControlPlane
//			e := &v1alpha1.Echo{ObjectMeta: tn.ObjectMeta()}
//			tn.Create(t, e)
//			tn.WaitReady(t, e)
//			tn.DeleteAndExpectNoLeftovers(t, e)
//		}
//	}
//
// The clusters behave like clusters: each runs the real kube-controller-manager, and
// the workload and MCP clusters have a simulated node, so what a provider installs there
// becomes Available and a deleted namespace goes (docs/design/real-clusters.md).
// Options.MCPClusters gives each standard tenant a ControlPlane server of its own;
// Options.Flux starts Flux and an OCI registry (Env.PushChart) serving TLS that Flux
// trusts, so an OCIRepository needs no spec.insecure. docs/design/testkit.md.
package testkit
