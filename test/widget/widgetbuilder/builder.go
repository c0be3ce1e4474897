// Package widgetbuilder declares the test provider (package widget) on the builder, as
// every in-process suite starts it. It is a package of its own, not part of package
// widget, because the engine's own tests use the widget types and the builder imports
// the engine.
package widgetbuilder

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// New is the builder every suite starts from: the Widget API, its WidgetConfig, a
// workload cluster with widget.WorkloadPermissions and the end-user permissions mcp. A
// suite adds KCP(...) where it serves kcp, and completes it with widget.Provider{}.
func New(name string, s *runtime.Scheme, mcp cluster.Permissions) *builder.Builder[*widget.Widget] {
	return builder.ServiceProvider[*widget.Widget](name, s).
		For(&widget.Widget{}).
		WithProviderConfig(&widget.WidgetConfig{}).
		WorkloadCluster(widget.WorkloadPermissions).
		MCPPermissions(mcp)
}
