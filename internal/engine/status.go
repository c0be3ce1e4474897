package engine

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
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
