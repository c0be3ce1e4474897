package engine

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// ownStatusProvider reports its parts in the widget's own status fields, sets a label
// and removes one, and runs during (a user's concurrent change) while it is called.
type ownStatusProvider struct {
	phase  string
	during func()
}

func (p *ownStatusProvider) CreateOrUpdate(_ context.Context, w *widget.Widget) (provider.Result, error) {
	if p.during != nil {
		p.during()
	}
	w.Status.Parts = []widget.WidgetPart{{Name: "config", Phase: p.phase, Message: "the provider's own words"}}
	labels := w.GetLabels()
	labels[widget.ColorLabel] = "blue"
	delete(labels, "stale")
	w.SetLabels(labels)
	return provider.Done(), nil
}

func (p *ownStatusProvider) Delete(context.Context, *widget.Widget) (provider.Result, error) {
	return provider.Done(), nil
}

// TestProviderOwnStatusAndLabels: the fields of the status the provider owns are
// written in the same single status write as the runtime's Ready condition, phases of
// the provider's own words included; an unchanged status is not written again, even
// from a cache that lags behind that write; the labels the provider sets or removes on
// its object are written without touching the ones the user set, even meanwhile, and
// before the status: whoever sees Ready sees the provider's labels.
func TestProviderOwnStatusAndLabels(t *testing.T) {
	obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1", Finalizers: []string{testFinalizer},
		Labels: map[string]string{"team": "a", "stale": "x"}}}
	p := &ownStatusProvider{phase: "Pending"}
	s := newLaggingServer(t, obj, p)
	// The user labels the widget while the provider works.
	p.during = func() {
		w := s.read(t)
		w.Labels["env"] = "prod"
		if err := s.server.Update(context.Background(), w); err != nil {
			t.Fatal(err)
		}
	}

	s.reconcile(t)
	got := s.read(t)
	if s.statusWrites != 1 {
		t.Errorf("%d status writes, want 1 carrying both the runtime's and the provider's fields", s.statusWrites)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v, want True", c)
	}
	if len(got.Status.Parts) != 1 || got.Status.Parts[0].Phase != "Pending" || got.Status.Identity == "" {
		t.Errorf("status %+v, want the provider's part with its own phase Pending, and the runtime's identity", got.Status)
	}
	want := map[string]string{"team": "a", "env": "prod", widget.ColorLabel: "blue"}
	if len(got.Labels) != len(want) || got.Labels["team"] != "a" || got.Labels["env"] != "prod" || got.Labels[widget.ColorLabel] != "blue" {
		t.Errorf("labels %v, want %v: the provider's set, its removal done, the user's kept", got.Labels, want)
	}
	if s.labelsAtStatusWrite[widget.ColorLabel] != "blue" {
		t.Errorf("labels %v when the status was written, want the provider's %s already there", s.labelsAtStatusWrite, widget.ColorLabel)
	}

	// Nothing changed: nothing is written.
	p.during = nil
	s.statusWrites, s.metadataWrites = 0, 0
	s.reconcile(t)
	if s.statusWrites != 0 || s.metadataWrites != 0 {
		t.Errorf("%d status and %d metadata writes of an unchanged object, want none", s.statusWrites, s.metadataWrites)
	}

	// Only the provider's own field changes: one status write.
	p.phase = "Installed"
	s.statusWrites = 0
	s.reconcile(t)
	if s.statusWrites != 1 {
		t.Errorf("%d status writes after the provider's phase changed, want 1", s.statusWrites)
	}
	if got := s.read(t); len(got.Status.Parts) != 1 || got.Status.Parts[0].Phase != "Installed" {
		t.Errorf("parts %+v, want phase Installed", got.Status.Parts)
	}

	// A cache that lags behind that write: the engine's own last write is what the
	// server holds, and the same status is not written again.
	s.lagging = got
	s.statusWrites = 0
	s.reconcile(t)
	if s.statusWrites != 0 {
		t.Errorf("%d status writes from a cache lagging behind the engine's own write, want 0", s.statusWrites)
	}
}

// TestStatusOfConvertsTheStatusAlone: the status converted alone is the status of the
// whole object's conversion; bare drops the conditions' transition times and leaves
// the object as it was.
func TestStatusOfConvertsTheStatusAlone(t *testing.T) {
	w := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"a": "b"}}}
	w.Spec.Color = "blue"
	w.Status.Parts = []widget.WidgetPart{{Name: "config", Phase: "Installed"}}
	then := metav1.NewTime(time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC))
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: then})
	before := w.DeepCopy()

	whole, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		t.Fatal(err)
	}
	got, err := statusOf(w, false)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, whole["status"]) {
		t.Errorf("status alone %v, want the whole object's %v", got, whole["status"])
	}

	bare, err := statusOf(w, true)
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(bare, "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["lastTransitionTime"] != nil {
		t.Errorf("bare conditions %v, want one without lastTransitionTime", conds)
	}
	if !equality.Semantic.DeepEqual(w, before) {
		t.Errorf("statusOf changed the object: %v, want %v", w, before)
	}
}
