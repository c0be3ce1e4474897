package engine

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// TestResultOf pins the reconcile results of the metrics to the status the engine
// wrote, so that a change to the status vocabulary shows up here.
func TestResultOf(t *testing.T) {
	status := func(s metav1.ConditionStatus, reason string) *v1alpha1.ServiceStatus {
		return &v1alpha1.ServiceStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: s, Reason: reason}}}
	}
	for _, c := range []struct {
		name     string
		err      error
		released bool
		st       *v1alpha1.ServiceStatus
		want     string
	}{
		{"error wins", errors.New("boom"), false, status(metav1.ConditionTrue, v1alpha1.ReasonReady), metrics.ResultError},
		{"released", nil, true, status(metav1.ConditionFalse, v1alpha1.ReasonDeleting), metrics.ResultReleased},
		{"ready", nil, false, status(metav1.ConditionTrue, v1alpha1.ReasonReady), metrics.ResultReady},
		{"installing", nil, false, status(metav1.ConditionFalse, v1alpha1.ReasonProgressing), metrics.ResultProgressing},
		{"deleting", nil, false, status(metav1.ConditionFalse, v1alpha1.ReasonDeleting), metrics.ResultProgressing},
		{"waiting for access", nil, false, status(metav1.ConditionFalse, v1alpha1.ReasonWaitingForWorkload), metrics.ResultWaiting},
		{"rejected", nil, false, status(metav1.ConditionFalse, v1alpha1.ReasonNotSingleton), metrics.ResultWaiting},
		{"no condition", nil, false, &v1alpha1.ServiceStatus{}, metrics.ResultWaiting},
	} {
		if got := resultOf(c.err, c.released, c.st); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestGrantedAfter: leaving a waiting state counts as a grant only for reasons the
// engine reaches after that access resolved.
func TestGrantedAfter(t *testing.T) {
	for _, c := range []struct {
		before, after string
		cluster       string // "" when no grant is observed
	}{
		{v1alpha1.ReasonWaitingForAccess, v1alpha1.ReasonWaitingForWorkload, metrics.ClusterEndUser},
		{v1alpha1.ReasonWaitingForAccess, v1alpha1.ReasonReady, metrics.ClusterEndUser},
		{v1alpha1.ReasonWaitingForAccess, v1alpha1.ReasonAccessDenied, ""},
		{v1alpha1.ReasonWaitingForAccess, v1alpha1.ReasonRuntimeError, ""},
		{v1alpha1.ReasonWaitingForAccess, v1alpha1.ReasonDeleting, ""},
		{v1alpha1.ReasonWaitingForWorkload, v1alpha1.ReasonReady, metrics.ClusterWorkload},
		{v1alpha1.ReasonWaitingForWorkload, v1alpha1.ReasonProviderError, metrics.ClusterWorkload},
		{v1alpha1.ReasonWaitingForWorkload, v1alpha1.ReasonWorkloadDenied, ""},
		{v1alpha1.ReasonReady, v1alpha1.ReasonProgressing, ""},
	} {
		g, ok := grantedAfter[c.before]
		got := ""
		if ok && g.next[c.after] {
			got = g.cluster
		}
		if got != c.cluster {
			t.Errorf("%s -> %s: grant of %q, want %q", c.before, c.after, got, c.cluster)
		}
	}
}

// TestReportedOnce: a transition seen again by a reconcile that read a stale object is
// not reported twice; a real change back and forth is.
func TestReportedOnce(t *testing.T) {
	r := newReported()
	uid := types.UID("u1")
	for i, c := range []struct {
		reason string
		want   bool
	}{
		{EventAccepted, true},
		{v1alpha1.ReasonWaitingForWorkload, true},
		{EventAccepted, false},                     // stale read without the finalizer
		{v1alpha1.ReasonWaitingForWorkload, false}, // stale read without the condition
		{v1alpha1.ReasonReady, true},
		{v1alpha1.ReasonProgressing, true},
		{v1alpha1.ReasonReady, true}, // ready again after an update: news
	} {
		if got := r.first(uid, c.reason); got != c.want {
			t.Errorf("step %d (%s): %v, want %v", i, c.reason, got, c.want)
		}
	}
	if !r.first("u2", v1alpha1.ReasonReady) {
		t.Error("another object's transition was suppressed")
	}
	r.forget(uid)
	if !r.first(uid, v1alpha1.ReasonReady) {
		t.Error("a forgotten object's transition was suppressed")
	}
}
