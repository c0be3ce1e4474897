package builder_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// A provider declares its Service type, its ProviderConfig, the clusters it needs
// with the rights it needs there, and hands Complete its Reconciler. command.Main
// does this in a provider's binary (through command.Provider.NewRuntime) and starts
// the Runtime; a program of its own calls Runtime.Start.
func ExampleServiceProvider() {
	scheme := runtime.NewScheme()
	if err := widget.AddToScheme(scheme); err != nil {
		fmt.Println(err)
		return
	}
	rt, err := builder.ServiceProvider[*widget.Widget]("widgets", scheme).
		For(&widget.Widget{}).
		WithProviderConfig(&widget.WidgetConfig{}).
		WorkloadCluster(widget.WorkloadPermissions).
		MCPPermissions(widget.KCPMCPPermissions).
		Complete(widget.Provider{})
	fmt.Println(rt != nil, err)
	// Output: true <nil>
}

// Complete checks the declarations before anything starts, and says what is missing.
func ExampleBuilder_Complete() {
	scheme := runtime.NewScheme()
	_, err := builder.ServiceProvider[*widget.Widget]("widgets", scheme).
		For(&widget.Widget{}).
		Complete(widget.Provider{})
	fmt.Println(err)
	// Output: service provider "widgets": no ProviderConfig type: call WithProviderConfig
}
