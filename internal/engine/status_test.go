package engine

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestStatusNotWrittenTwiceFromALaggingCache: a reconcile that reads the object from a
// cache which has not seen the engine's own status write yet does not write the same
// status again; a status someone else changed meanwhile is written again.
func TestStatusNotWrittenTwiceFromALaggingCache(t *testing.T) {
	obj := &widget.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default", UID: "u1", Finalizers: []string{testFinalizer}}}
	p := &switchProvider{}
	s := newLaggingServer(t, obj, p)

	before := s.read(t)
	s.reconcile(t)
	if s.statusWrites != 1 {
		t.Fatalf("%d status writes on the first reconcile, want 1", s.statusWrites)
	}
	// The cache still shows the object as it was before the write.
	s.lagging = before
	s.reconcile(t)
	if s.statusWrites != 1 {
		t.Errorf("%d status writes after a reconcile from the lagging cache, want still 1", s.statusWrites)
	}

	// Someone else resets the status: the cache shows a newer version, written again.
	changed := s.read(t)
	changed.Status = widget.WidgetStatus{}
	if err := s.server.Status().Update(context.Background(), changed); err != nil {
		t.Fatal(err)
	}
	s.statusWrites = 0
	s.lagging = s.read(t)
	s.reconcile(t)
	if s.statusWrites != 1 {
		t.Errorf("%d status writes after someone else changed the status, want 1", s.statusWrites)
	}

	// A brief state, left at once: the engine writes it, and the next reconcile, from a
	// cache that has not seen that write, must write Ready again although Ready is what
	// the cache shows.
	ready := s.read(t)
	s.lagging = ready
	p.err = errors.New("brief failure")
	if _, err := s.engine.Reconcile(context.Background(), s.req); err == nil {
		t.Fatal("reconcile with a failing provider: no error")
	}
	if c := meta.FindStatusCondition(s.read(t).Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonProviderError {
		t.Fatalf("after the failure: %+v, want ProviderError", c)
	}
	p.err = nil
	s.statusWrites = 0
	s.reconcile(t)
	if s.statusWrites != 1 {
		t.Errorf("%d status writes after the brief state, from the lagging cache, want 1", s.statusWrites)
	}
	c := meta.FindStatusCondition(s.read(t).Status.Conditions, v1alpha1.ConditionReady)
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
