package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/openmcp-project/kcp-serviceprovider/internal/providerconfig"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// widgetScheme knows the widget's types.
func widgetScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := widget.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// testOptions are the engine's options of the unit tests: the widget, a fake platform
// cluster holding a valid WidgetConfig, the recording tenancy and workload, and r. A
// test changes what it examines.
func testOptions(t testing.TB, r provider.Reconciler[*widget.Widget]) Options[*widget.Widget] {
	t.Helper()
	pc := &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: "widget"}, Spec: widget.WidgetConfigSpec{Greeting: "hello"}}
	platform := fake.NewClientBuilder().WithScheme(widgetScheme(t)).WithObjects(pc).Build()
	return Options[*widget.Widget]{
		NewObject:      func() *widget.Widget { return &widget.Widget{} },
		Finalizer:      testFinalizer,
		ProviderConfig: &providerconfig.Loader{Reader: platform, Name: "widget", New: func() provider.ProviderConfig { return &widget.WidgetConfig{} }},
		Reconciler:     r,
		Tenancy:        &recordingTenancy{},
		Workload:       &recordingWorkload{},
		Provider:       "widget",
	}
}

// widgetClusters is a cluster set for widgets, holding cl as workspace "ws" if given.
func widgetClusters(cl ctrlclient.Client) *clusterSet {
	set := newClusterSet(func() ctrlclient.ObjectList { return &widget.WidgetList{} }, nil)
	if cl != nil {
		set.clusters["ws"] = &staleCluster{cache: cl, server: cl}
	}
	return set
}
