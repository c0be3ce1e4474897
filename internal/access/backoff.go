package access

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxDeniedRetry caps the backoff between orders of a request that keeps being denied.
const maxDeniedRetry = time.Hour

// waitingMessage is what the tenant reads while its requests are pending, the same
// for every step of the wait (see Ensure).
func (r *Requester) waitingMessage(key Key) string {
	return fmt.Sprintf("waiting for the platform to grant access to the %s cluster (requests in platform namespace %s)",
		r.opts.Registration.ID(), key.Identity.TenantNamespace())
}

// pendingRequest is the request the platform has yet to grant: the ClusterRequest
// while it is pending, then the AccessRequest; nil when neither exists yet.
func pendingRequest(cr *clustersv1alpha1.ClusterRequest, ar *clustersv1alpha1.AccessRequest) client.Object {
	if cr != nil && !cr.Status.IsGranted() {
		return cr
	}
	if ar != nil && !ar.Status.IsGranted() {
		return ar
	}
	// A granted request waiting for its new generation to be granted has no
	// timestamp of the change; it is not timed.
	return nil
}

// notGranted tells the tenant that the platform has left a request pending past
// GrantTimeout, and asks the platform again, once per GrantTimeout: the operation
// annotation makes the responsible controller reconcile the request now, whatever its
// backoff. The request itself stays: withdrawing it would throw away a grant in
// progress (a cluster being provisioned) and, for the last request of a Cluster, the
// Cluster with it. retry is the tenant's waitingRetry of this look.
func (r *Requester) notGranted(ctx context.Context, key Key, pending client.Object, says string, retry time.Duration) error {
	kind := "AccessRequest"
	if _, ok := pending.(*clustersv1alpha1.ClusterRequest); ok {
		kind = "ClusterRequest"
	}
	now := time.Now()
	r.mu.Lock()
	st := r.state(key)
	ask := now.Sub(st.askedAt) >= r.opts.GrantTimeout
	if ask {
		st.askedAt = now
	}
	askedAt := st.askedAt
	r.mu.Unlock()
	if ask {
		if err := askAgain(ctx, r.platform, pending); err != nil {
			r.mu.Lock()
			st.askedAt = time.Time{}
			r.mu.Unlock()
			return fmt.Errorf("asking the platform again about %s %s/%s: %w", kind, pending.GetNamespace(), pending.GetName(), err)
		}
	}
	msg := fmt.Sprintf("the platform has not granted %s %s/%s for %s (pending since %s); asked it again at %s",
		kind, pending.GetNamespace(), pending.GetName(), now.Sub(pending.GetCreationTimestamp().Time).Round(time.Second),
		pending.GetCreationTimestamp().UTC().Format(time.RFC3339), askedAt.UTC().Format(time.RFC3339))
	if says != "" {
		msg += "; the platform says: " + says
	}
	// Look again no later than the next ask is due.
	next := max(time.Until(askedAt.Add(r.opts.GrantTimeout)), r.opts.RetryInterval)
	return &WaitingError{Reason: r.opts.NotGrantedReason, Final: true, RequeueAfter: min(retry, next), Message: msg}
}

// askAgain sets openMCP's operation annotation to "reconcile" on a request; the
// controller responsible for it reconciles it and removes the annotation.
func askAgain(ctx context.Context, c client.Client, obj client.Object) error {
	if obj.GetAnnotations()[openmcpconst.OperationAnnotation] == openmcpconst.OperationAnnotationValueReconcile {
		return nil
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, openmcpconst.OperationAnnotation, openmcpconst.OperationAnnotationValueReconcile))
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// waitingRetry is when to look at a tenant's pending request again: RetryInterval,
// doubling with each look in a row, up to maxWaitingRetry (or RetryInterval if that is
// longer).
func (r *Requester) waitingRetry(key Key) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state(key)
	n := st.waits
	st.waits++
	return max(min(r.opts.RetryInterval<<min(n, 16), maxWaitingRetry), r.opts.RetryInterval)
}

// requestUIDs are the UIDs of the tenant's ClusterRequest (if the registration has
// one) and AccessRequest, as the platform reads show them now.
func (r *Requester) requestUIDs(ctx context.Context, key Key) []types.UID {
	var uids []types.UID
	if r.opts.Registration.ClusterRequestAvailable() {
		if cr, err := r.lib.ClusterRequest(ctx, key.Request, r.opts.Registration.ID(), key.data()...); err == nil && cr != nil {
			uids = append(uids, cr.UID)
		}
	}
	if ar, err := r.accessRequest(ctx, key); err == nil && ar != nil {
		uids = append(uids, ar.UID)
	}
	return uids
}

// withdrawnGone returns a *WaitingError while the platform reads still show a request
// withdrawn last (tenantState.withdrawn), and forgets them once none does.
func (r *Requester) withdrawnGone(ctx context.Context, key Key) error {
	r.mu.Lock()
	st := r.tenants[tenantKey(key)]
	var withdrawn []types.UID
	if st != nil {
		withdrawn = st.withdrawn
	}
	r.mu.Unlock()
	if len(withdrawn) == 0 {
		return nil
	}
	for _, uid := range r.requestUIDs(ctx, key) {
		if slices.Contains(withdrawn, uid) {
			return &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.opts.RetryInterval,
				Message: "withdrawing the denied request to order it again"}
		}
	}
	r.mu.Lock()
	if st := r.tenants[tenantKey(key)]; st != nil {
		st.withdrawn = nil
	}
	r.mu.Unlock()
	return nil
}

// denied records a denial and returns what the tenant reads. Once the denial has stood
// for the backoff, the requests are withdrawn (on the next Ensure) and ordered again.
func (r *Requester) denied(key Key, msg string) error {
	now := time.Now()
	r.mu.Lock()
	st := r.state(key)
	if st.deniedSince.IsZero() {
		st.deniedSince, st.denials = now, st.denials+1
	}
	retryAt := st.deniedSince.Add(min(r.opts.DeniedRetry<<min(st.denials-1, 16), maxDeniedRetry))
	if !now.Before(retryAt) {
		// Withdraw on the next Ensure; the next denial starts a new wait.
		st.withdrawing, st.deniedSince = true, time.Time{}
		retryAt = now
	}
	r.mu.Unlock()
	return &WaitingError{Reason: r.opts.DeniedReason, Final: true, RequeueAfter: max(time.Until(retryAt), r.opts.RetryInterval),
		Message: fmt.Sprintf("%s; ordering it again at %s", msg, retryAt.UTC().Format(time.RFC3339))}
}

// platformProblem returns what the platform reported as wrong with a pending request,
// as "<Kind> <namespace>/<name>: <reason>: <message>", or "" when it reports nothing
// but a wait. It reads the conditions that are not True; a reason starting with
// "WaitingFor" (openMCP's reasons for a wait, e.g. WaitingForClusterRequest) is a
// step, not a problem. The ClusterRequest is looked at first: an AccessRequest
// waiting for it says little more. Platforms that write no conditions (the
// openmcp-operator's AccessRequest controller keeps only the phase) report nothing.
func platformProblem(cr *clustersv1alpha1.ClusterRequest, ar *clustersv1alpha1.AccessRequest) string {
	if cr != nil && !cr.Status.IsGranted() {
		if s := problemIn(cr.Status.Conditions); s != "" {
			return fmt.Sprintf("ClusterRequest %s/%s: %s", cr.Namespace, cr.Name, s)
		}
	}
	if ar != nil && !ar.Status.IsGranted() {
		if s := problemIn(ar.Status.Conditions); s != "" {
			return fmt.Sprintf("AccessRequest %s/%s: %s", ar.Namespace, ar.Name, s)
		}
	}
	return ""
}

func problemIn(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Status == metav1.ConditionTrue || c.Reason == "" || strings.HasPrefix(c.Reason, "WaitingFor") {
			continue
		}
		if c.Message == "" {
			return c.Reason
		}
		return c.Reason + ": " + c.Message
	}
	return ""
}

// deniedMessage picks the platform's explanation from the request's conditions.
func deniedMessage(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue && c.Message != "" {
			return c.Message
		}
	}
	for _, c := range conds {
		if c.Message != "" {
			return c.Message
		}
	}
	return "no reason given"
}
