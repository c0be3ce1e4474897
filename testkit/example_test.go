package testkit_test

import (
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/testkit"
)

// A provider's end-to-end test: the local platform with the provider's runtime, one
// tenant in each mode, and what a tenant would check. It needs the test servers (the
// package's TestMain is testkit.Main, which says how to get them), so this example is
// compiled, not run; examples/echo/e2e is the whole of echo's.
func ExampleStart() {
	testEcho := func(t *testing.T) {
		scheme, err := echo.NewScheme()
		if err != nil {
			t.Fatal(err)
		}
		config := &v1alpha1.ProviderConfig{Spec: v1alpha1.ProviderConfigSpec{
			Versions: []v1alpha1.WorkerVersion{{Name: "v1.0.0", Image: "example.org/echo-worker:v1.0.0"}}}}
		env := testkit.Start(t, testkit.Options{Provider: echo.Description(), Scheme: scheme, ProviderConfig: config})
		for _, tn := range env.Tenants(t, "demo") { // a bound kcp workspace and a ControlPlane
			t.Run(string(tn.Mode), func(t *testing.T) {
				e := &v1alpha1.Echo{ObjectMeta: tn.ObjectMeta(), Spec: v1alpha1.EchoSpec{Message: "hello"}}
				tn.Create(t, e)
				tn.WaitReady(t, e)
				// ... the provider's own assertions, on env.Workload and tn.EndUser ...
				tn.DeleteAndExpectNoLeftovers(t, e) // no request, credential or workspace RBAC left
			})
		}
	}
	_ = testEcho // in a provider's repository: func TestEcho(t *testing.T) { ... }
}
