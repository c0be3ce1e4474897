package engine

import (
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// readinessChanged passes the changes of a platform object a provider waits on
// (Options.PlatformWatches): its deletion, and an update that changes its generation
// or its status other than by its conditions, or its Ready condition (status, reason,
// message, observed generation: the convention Flux and most controllers follow). It
// drops its creation (the provider wrote it, and is still reconciling) and the updates
// of other conditions alone: Flux rewrites a HelmRelease's Reconciling condition many
// times while it installs, and each passed update costs the tenant a reconcile with the
// provider's reads. The rest of the status is compared whole because a controller may
// finish in two writes: Flux's helm-controller marks a HelmRelease Ready and records
// the upgraded chart in status.history apart, and a provider that waits for the
// version must be woken by the second (the greeter's rollout stayed on "rolling" when
// only the Ready condition was compared).
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

// readiness is the object's status with its conditions but Ready left out, as JSON:
// what readinessChanged compares.
func readiness(o client.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return ""
	}
	status, _ := u["status"].(map[string]any)
	kept := maps.Clone(status)
	if kept == nil {
		kept = map[string]any{}
	}
	if conditions, ok := status["conditions"].([]any); ok {
		var ready []any
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				ready = append(ready, map[string]any{"status": m["status"], "reason": m["reason"], "message": m["message"],
					"observedGeneration": m["observedGeneration"]})
			}
		}
		kept["conditions"] = ready
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return ""
	}
	return string(b)
}
