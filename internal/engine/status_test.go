package engine

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestStatusNotWrittenTwiceFromALaggingCache: a reconcile that reads the object from a
// cache which has not seen the engine's own status write yet does not write the same
// status again; a status someone else changed meanwhile is written again.
func TestStatusNotWrittenTwiceFromALaggingCache(t *testing.T) {
	scheme := widgetScheme(t)
	obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1", Finalizers: []string{testFinalizer}}}

	// The cache answers with lagging (when set) instead of the server's object.
	var lagging *widget.Widget
	statusWrites := 0
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj).WithStatusSubresource(&widget.Widget{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c ctrlclient.WithWatch, key ctrlclient.ObjectKey, o ctrlclient.Object, opts ...ctrlclient.GetOption) error {
				if w, ok := o.(*widget.Widget); ok && lagging != nil {
					lagging.DeepCopyInto(w)
					return nil
				}
				return c.Get(ctx, key, o, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c ctrlclient.Client, sub string, o ctrlclient.Object, p ctrlclient.Patch, opts ...ctrlclient.SubResourcePatchOption) error {
				statusWrites++
				return c.SubResource(sub).Patch(ctx, o, p, opts...)
			},
		}).Build()
	p := &switchProvider{}
	e := New(testOptions(t, p), widgetClusters(server))
	req := mcreconcile.Request{ClusterName: "ws", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "w"}}}
	reconcileOnce := func() {
		t.Helper()
		if _, err := e.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	read := func() *widget.Widget {
		t.Helper()
		lag := lagging
		lagging = nil
		defer func() { lagging = lag }()
		w := &widget.Widget{}
		if err := server.Get(context.Background(), req.NamespacedName, w); err != nil {
			t.Fatal(err)
		}
		return w
	}

	before := read()
	reconcileOnce()
	if statusWrites != 1 {
		t.Fatalf("%d status writes on the first reconcile, want 1", statusWrites)
	}
	// The cache still shows the object as it was before the write.
	lagging = before
	reconcileOnce()
	if statusWrites != 1 {
		t.Errorf("%d status writes after a reconcile from the lagging cache, want still 1", statusWrites)
	}

	// Someone else resets the status: the cache shows a newer version, written again.
	changed := read()
	changed.Status = widget.WidgetStatus{}
	if err := server.Status().Update(context.Background(), changed); err != nil {
		t.Fatal(err)
	}
	statusWrites = 0
	lagging = read()
	reconcileOnce()
	if statusWrites != 1 {
		t.Errorf("%d status writes after someone else changed the status, want 1", statusWrites)
	}

	// A brief state, left at once: the engine writes it, and the next reconcile, from a
	// cache that has not seen that write, must write Ready again although Ready is what
	// the cache shows.
	ready := read()
	lagging = ready
	p.err = errors.New("brief failure")
	if _, err := e.Reconcile(context.Background(), req); err == nil {
		t.Fatal("reconcile with a failing provider: no error")
	}
	if c := meta.FindStatusCondition(read().Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonProviderError {
		t.Fatalf("after the failure: %+v, want ProviderError", c)
	}
	p.err = nil
	statusWrites = 0
	reconcileOnce()
	if statusWrites != 1 {
		t.Errorf("%d status writes after the brief state, from the lagging cache, want 1", statusWrites)
	}
	c := meta.FindStatusCondition(read().Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Reason != v1alpha1.ReasonReady {
		t.Errorf("after the brief state: %+v, want Ready", c)
	}
}

// switchProvider fails with err when it is set.
type switchProvider struct{ err error }

func (p *switchProvider) CreateOrUpdate(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Result{}, p.err
}
func (p *switchProvider) Delete(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Result{}, p.err
}
