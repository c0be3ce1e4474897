package localplatform

import (
	"context"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
)

// Decision is a policy's answer to a request. The zero value grants it.
type Decision struct {
	// Deny makes the request Denied, with Reason (default "Denied") and Message in its
	// Granted condition.
	Deny bool
	// DelayUntil keeps the request Pending until this time, when the policy is asked
	// again. Ignored when Deny is set.
	DelayUntil time.Time
	Reason     string
	Message    string
}

// Denied returns a Decision that denies a request.
func Denied(reason, message string) Decision {
	return Decision{Deny: true, Reason: reason, Message: message}
}

// Delayed returns a Decision that keeps a request Pending until t.
func Delayed(until time.Time) Decision {
	return Decision{DelayUntil: until}
}

// ClusterRequestPolicy decides a ClusterRequest that is not granted yet. It is asked on
// every reconciliation until the request is granted (a denied request is reconciled
// again when it changes, a delayed one when the delay ends); a granted request stays
// granted.
type ClusterRequestPolicy func(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) Decision

// AccessRequestPolicy decides an AccessRequest whose current generation is not granted
// yet, with the same timing as ClusterRequestPolicy. It is not asked again for token
// renewals of a granted generation. Denying a request removes what it was granted.
type AccessRequestPolicy func(ctx context.Context, ar *clustersv1alpha1.AccessRequest) Decision
