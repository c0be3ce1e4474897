package migration_test

import (
	"fmt"

	"github.com/openmcp-project/kcp-serviceprovider/migration"
)

// A provider whose previous binary ran on opencontrolplane-runtime names what that
// binary chose; the runtime then keeps those names (request names, labels, the
// ProviderConfig, the reasons on Service objects) and takes the tenants over in place
// when the ServiceProvider's image is swapped.
func ExampleFromOCR() {
	old := &migration.FromOCR{
		ControllerName:     "Flux",
		OnboardingRequests: []string{"flux--onboarding-run"},
		Reasons:            migration.OCRReasons,
		Flags:              migration.OCRFlags,
	}
	if err := old.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("requests' controller:", old.RequestController("flux"))
	fmt.Println("ProviderConfig:", old.ProviderConfig("flux"))
	fmt.Printf("MCP registration: %+v\n", old.MCPRegistration())
	fmt.Println("reason Ready written as:", old.Reason("Ready"))
	fmt.Println("reason ProviderError written as:", old.Reason("ProviderError"))
	// Output:
	// requests' controller: Flux
	// ProviderConfig: flux
	// MCP registration: {ID:mcp Suffix:mcp}
	// reason Ready written as: ReconcileSuccess
	// reason ProviderError written as: ReconcileError
}
