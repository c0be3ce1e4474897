package engine

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

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
		set.clusters["ws"] = &engagedCluster{cl: &staleCluster{cache: cl, server: cl}, ctx: context.Background()}
	}
	return set
}

// laggingServer is one widget on a fake server whose cache can lag: while lagging is
// set, every read of the widget answers with it instead of the server's object. It
// counts the engine's status and metadata writes.
type laggingServer struct {
	server                       ctrlclient.WithWatch
	engine                       *Engine[*widget.Widget]
	req                          mcreconcile.Request
	lagging                      *widget.Widget
	statusWrites, metadataWrites int
	// labelsAtStatusWrite are the object's labels on the server when the last status
	// write arrived.
	labelsAtStatusWrite map[string]string
}

func newLaggingServer(t testing.TB, obj *widget.Widget, r provider.Reconciler[*widget.Widget]) *laggingServer {
	t.Helper()
	s := &laggingServer{req: mcreconcile.Request{ClusterName: "ws", Request: reconcile.Request{NamespacedName: ctrlclient.ObjectKeyFromObject(obj)}}}
	s.server = fake.NewClientBuilder().WithScheme(widgetScheme(t)).WithObjects(obj).WithStatusSubresource(&widget.Widget{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c ctrlclient.WithWatch, key ctrlclient.ObjectKey, o ctrlclient.Object, opts ...ctrlclient.GetOption) error {
				if w, ok := o.(*widget.Widget); ok && s.lagging != nil {
					s.lagging.DeepCopyInto(w)
					return nil
				}
				return c.Get(ctx, key, o, opts...)
			},
			Patch: func(ctx context.Context, c ctrlclient.WithWatch, o ctrlclient.Object, p ctrlclient.Patch, opts ...ctrlclient.PatchOption) error {
				s.metadataWrites++
				return c.Patch(ctx, o, p, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c ctrlclient.Client, sub string, o ctrlclient.Object, p ctrlclient.Patch, opts ...ctrlclient.SubResourcePatchOption) error {
				s.statusWrites++
				held := &widget.Widget{}
				if err := c.Get(ctx, ctrlclient.ObjectKeyFromObject(o), held); err != nil {
					return err
				}
				s.labelsAtStatusWrite = held.Labels
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			},
		}).Build()
	s.engine = New(testOptions(t, r), widgetClusters(s.server))
	return s
}

// reconcile runs the engine once and fails the test on an error.
func (s *laggingServer) reconcile(t testing.TB) {
	t.Helper()
	if _, err := s.engine.Reconcile(context.Background(), s.req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

// read returns the server's widget, past the lagging cache.
func (s *laggingServer) read(t testing.TB) *widget.Widget {
	t.Helper()
	lag := s.lagging
	s.lagging = nil
	defer func() { s.lagging = lag }()
	w := &widget.Widget{}
	if err := s.server.Get(context.Background(), s.req.NamespacedName, w); err != nil {
		t.Fatal(err)
	}
	return w
}
