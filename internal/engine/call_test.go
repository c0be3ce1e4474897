package engine

import (
	"context"
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// misbehavingProvider panics with panicWith when it is set, and fails with err.
type misbehavingProvider struct {
	panicWith any
	err       error
}

func (p *misbehavingProvider) CreateOrUpdate(context.Context, *widget.Widget) (provider.Result, error) {
	if p.panicWith != nil {
		panic(p.panicWith)
	}
	return provider.Result{}, p.err
}

func (p *misbehavingProvider) Delete(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	return p.CreateOrUpdate(ctx, w)
}

// TestProviderPanicAndTerminalError: a panicking provider and a terminal error each
// show on the object's Ready condition with their own reason, in the same single
// status write; the panic is recovered (the test would crash otherwise) and counted,
// and only the terminal error is not requeued.
func TestProviderPanicAndTerminalError(t *testing.T) {
	obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1", Finalizers: []string{testFinalizer}}}
	server := fake.NewClientBuilder().WithScheme(widgetScheme(t)).WithObjects(obj).WithStatusSubresource(&widget.Widget{}).Build()
	p := &misbehavingProvider{}
	opts := testOptions(t, p)
	opts.Provider = "panics"
	e := New(opts, widgetClusters(server))
	req := mcreconcile.Request{ClusterName: "ws", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "w"}}}
	ready := func() *metav1.Condition {
		t.Helper()
		w := &widget.Widget{}
		if err := server.Get(context.Background(), req.NamespacedName, w); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady)
	}
	panics := func() float64 {
		m := &dto.Metric{}
		if err := metrics.ProviderPanicsTotal.WithLabelValues("panics", string(opts.Tenancy.Mode()), "CreateOrUpdate").Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}

	p.panicWith = "index out of range"
	res, err := e.Reconcile(context.Background(), req)
	var panicked *PanicError
	if !errors.As(err, &panicked) || panicked.Method != "CreateOrUpdate" {
		t.Fatalf("reconcile of a panicking provider: %v, want a PanicError of CreateOrUpdate", err)
	}
	if errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("a panic is retried with backoff; got a terminal error")
	}
	if c := ready(); c == nil || c.Reason != v1alpha1.ReasonProviderPanic || c.Message != "provider CreateOrUpdate panicked: index out of range" {
		t.Errorf("Ready after a panic: %+v, want reason %s with the panic's value", c, v1alpha1.ReasonProviderPanic)
	}
	if got := panics(); got != 1 {
		t.Errorf("provider_panics_total = %v, want 1", got)
	}

	p.panicWith, p.err = nil, provider.Terminal(errors.New(`version "9.9" is not offered by this platform`))
	res, err = e.Reconcile(context.Background(), req)
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("reconcile with a terminal error: %v, want it terminal (not retried)", err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("a terminal error asks to come back after %s, want never (until a change)", res.RequeueAfter)
	}
	if c := ready(); c == nil || c.Reason != v1alpha1.ReasonProviderRejected || c.Status != metav1.ConditionFalse || c.Message != `version "9.9" is not offered by this platform` {
		t.Errorf("Ready after a terminal error: %+v, want False/%s", c, v1alpha1.ReasonProviderRejected)
	}
}
