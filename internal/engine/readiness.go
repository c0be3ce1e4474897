package engine

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// readinessChanged passes the changes of a platform object a provider waits on
// (Options.PlatformWatches): its deletion, and an update that changes its generation
// or what its status says of its readiness (status.observedGeneration and the Ready
// condition's status, reason and observed generation, the convention Flux and most
// controllers follow). It drops its creation (the provider wrote it, and is still
// reconciling) and the updates in between: Flux rewrites a HelmRelease's status many
// times while it installs (progress messages, handled-at times), and each passed
// update costs the tenant a reconcile with the provider's reads.
type readinessChanged struct {
	predicate.Funcs
}

func (readinessChanged) Create(event.CreateEvent) bool   { return false }
func (readinessChanged) Delete(event.DeleteEvent) bool   { return true }
func (readinessChanged) Generic(event.GenericEvent) bool { return false }

func (readinessChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return true
	}
	if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
		e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() {
		return true
	}
	return readiness(e.ObjectOld) != readiness(e.ObjectNew)
}

// readinessOf is what readinessChanged compares.
type readinessOf struct {
	observedGeneration          int64
	status, reason              string
	conditionObservedGeneration int64
	found                       bool
}

func readiness(o client.Object) readinessOf {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return readinessOf{}
	}
	var r readinessOf
	r.observedGeneration, _, _ = unstructured.NestedInt64(u, "status", "observedGeneration")
	conditions, _, _ := unstructured.NestedSlice(u, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		r.found = true
		r.status, _, _ = unstructured.NestedString(m, "status")
		r.reason, _, _ = unstructured.NestedString(m, "reason")
		r.conditionObservedGeneration, _, _ = unstructured.NestedInt64(m, "observedGeneration")
	}
	return r
}
