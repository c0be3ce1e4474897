package engine

import (
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// setReady is the one place the Ready condition, phase and observed generation are set.
// meta.SetStatusCondition keeps the transition time when the status does not flip, so
// an unchanged outcome leaves the status byte-for-byte equal and nothing is written.
func setReady(st *v1alpha1.ServiceStatus, generation int64, status metav1.ConditionStatus, reason, message string, phase v1alpha1.Phase) {
	st.ObservedGeneration = generation
	st.Phase = phase
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: generation,
	})
}

// writtenStatuses remembers, per object, the status the engine last wrote and the
// resourceVersion it wrote it over. A reconcile that follows at once (a grant's watch
// event often arrives before the status write's) can read the object from a cache that
// has not seen that write (the lag that made events repeat, docs/design/observability.md):
// the object still carries the old resourceVersion, the status looks out of date, and
// the engine would write the same status again. Such a write is skipped, but only when
// the cached object is exactly the version written over: a status that anyone else
// changed since is written again. The other way round, a status equal to the stale read
// but not to the engine's own last write (a brief state such as AccessRepaired, left
// at once) is written, from that write.
type writtenStatuses struct{ *memory[writtenStatus] }

type writtenStatus struct {
	over string // the resourceVersion the status was written over
	// status is the whole status written, service the runtime's part of it, both
	// without transition times.
	status  map[string]any
	service *v1alpha1.ServiceStatus
}

func newWrittenStatuses() *writtenStatuses {
	return &writtenStatuses{newMemory[writtenStatus](time.Minute)}
}

// lastOver returns the status last written over version of object uid, if the last
// write was over that version.
func (w *writtenStatuses) lastOver(uid types.UID, version string) (writtenStatus, bool) {
	last, ok := w.get(uid)
	if !ok || last.over != version {
		return writtenStatus{}, false
	}
	return last, true
}

// retime gives each condition of st whose status differs from held's (or that held
// lacks) the transition time now: st was derived from a cache older than held.
func retime(st, held *v1alpha1.ServiceStatus, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if h := meta.FindStatusCondition(held.Conditions, c.Type); h == nil || h.Status != c.Status {
			c.LastTransitionTime = now
		}
	}
}

// record notes that obj's status was written over the resourceVersion over.
func (w *writtenStatuses) record(obj provider.Object, over string) error {
	bare, err := statusOf(obj, true)
	if err != nil {
		return err
	}
	service := withoutTransitionTimes(obj.GetServiceStatus())
	w.update(obj.GetUID(), func(writtenStatus, bool) (writtenStatus, bool) {
		return writtenStatus{over: over, status: bare, service: service}, true
	})
	return nil
}

// withoutTransitionTimes returns a copy of st without the conditions' transition times:
// read over the same stale version, a condition transitions again, a moment later
// than in the status written, which keeps the earlier time.
func withoutTransitionTimes(st *v1alpha1.ServiceStatus) *v1alpha1.ServiceStatus {
	c := st.DeepCopy()
	for i := range c.Conditions {
		c.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return c
}

// conditionReason is what the API server accepts as a condition's reason.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// reasonOr is the provider's reason when it is one the API server accepts, else def.
func reasonOr(provided, def string) string {
	if len(provided) <= 1024 && conditionReason.MatchString(provided) {
		return provided
	}
	return def
}
