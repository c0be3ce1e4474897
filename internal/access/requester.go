package access

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openmcp-project/controller-utils/pkg/logging"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/kubeconfig"
)

// Options configure a Requester.
type Options struct {
	// ControllerName names the requests (`<controller>--<tenant>--<suffix>`) and is the
	// managed-by label; the provider name.
	ControllerName string
	// Registration is the single cluster the Requester orders or accesses.
	Registration advanced.ClusterRegistration
	// Labels adds labels to the requests, e.g. the tenant's onboarding name or logical
	// cluster, so that their events can be mapped back to the Service object.
	Labels func(req reconcile.Request) map[string]string
	// RetryInterval is how soon a pending request is looked at again, the first time;
	// then the wait doubles, up to a minute. Grants also trigger a reconcile through
	// the engine's watch, so this is a safety net.
	RetryInterval time.Duration
	// Scheme for the clients handed out.
	Scheme *runtime.Scheme
	// DeniedReason is the Ready reason when the platform denies the request.
	DeniedReason string
	// WaitingReason is the Ready reason while the request is pending.
	WaitingReason string
	// ClientOptions tune the clients handed out (QPS, burst).
	Tune func(*rest.Config)
	// NotGrantedReason is the Ready reason when a request stays pending for longer
	// than GrantTimeout.
	NotGrantedReason string
	// GrantTimeout is how long a request may stay pending before the tenant is told
	// it is not granted and the platform is asked again (the openMCP operation
	// annotation "reconcile" on the pending request, which also lifts the responsible
	// controller's backoff), once per GrantTimeout. openMCP's controllers write no
	// Denied phase: a request they cannot serve stays Pending, so without this a
	// tenant would read "waiting" for ever. Real grants take minutes (a new cluster
	// is provisioned, a shared one is scheduled at once). Default 15 minutes.
	GrantTimeout time.Duration
	// Recheck is how long a granted access whose requests are unchanged is handed out
	// from memory, without the library's pass over the requests and without reading
	// the access Secret again (within the token's renewal time). The requests are read
	// from the informer cache, so a change to either (a new generation, a denial, a
	// deletion) ends it at once; the interval bounds only what the cache cannot see, a
	// Secret replaced without its AccessRequest changing. Default 10 minutes; negative
	// takes the full pass on every Ensure.
	Recheck time.Duration
	// DeniedRetry is how long a denied request stands before it is withdrawn and
	// ordered again, doubling with each denial in a row up to an hour. A platform's
	// denial is final for that request, but its reason (quota, policy, capacity) often
	// is not. Default 10 × RetryInterval.
	DeniedRetry time.Duration
}

// DefaultRecheck is Options.Recheck's default.
const DefaultRecheck = 10 * time.Minute

// DefaultGrantTimeout is Options.GrantTimeout's default.
const DefaultGrantTimeout = 15 * time.Minute

// maxDeniedRetry caps the backoff between orders of a request that keeps being denied.
const maxDeniedRetry = time.Hour

// Key names one tenant's request: the library's reconcile.Request (its Name and
// Namespace derive the request name and labels) and the tenant identity (which derives
// the platform namespace).
type Key struct {
	Request  reconcile.Request
	Identity cluster.Identity
}

// Requester orders one kind of cluster access for many tenants.
type Requester struct {
	opts     Options
	platform client.Client
	// namespaces is platform with the tenant namespaces seen remembered; the library
	// and the Requester's own namespace reads go through it.
	namespaces *namespaceMemory
	// lib orders and reads; release only deletes. They are two instances of the
	// library because it remembers, per tenant (its reconcile.Request), that a
	// deletion started and, until one finishes in the same process, refuses to create
	// anything for that tenant. In this runtime a tenant outlives its objects (a
	// workspace's next object, a recreated one, a replica that lost and regained
	// leadership mid-deletion), and that memory left a promoted object waiting for a
	// workload cluster that was never ordered. The engine already guarantees what the
	// memory protects: it orders only for an admitted object that is not being deleted.
	lib, release advanced.ClusterAccessReconciler

	mu    sync.Mutex
	cache map[types.UID]cachedAccess
	// granted remembers, by tenantKey, each tenant's last full pass that ended granted
	// (current).
	granted map[string]grantedAccess
	// tenants holds what is remembered of a tenant between Ensures (by tenantKey):
	// only tenants whose requests are pending or denied.
	tenants map[string]*tenantState
	// routed remembers when routeAccessRequest created each AccessRequest, until the
	// informer cache shows it (route.go).
	routed map[client.ObjectKey]time.Time
	// records holds, by tenantKey, the annotations Record was asked to keep while the
	// tenant had no AccessRequest, for routeAccessRequest to create it with; only
	// until Record sees the request.
	records map[string]map[string]string
}

// maxWaitingRetry caps the backoff between looks at a pending request. The grant
// itself wakes the tenant through the engine's watch; the looks are a safety net, and
// at a fixed RetryInterval hundreds of pending tenants kept the work queue full of them
// (the benchmark at 500 workspaces) and the grants waited behind.
const maxWaitingRetry = time.Minute

// tenantState is one tenant's backoffs.
type tenantState struct {
	// waits counts the looks at a pending request in a row (waitingRetry).
	waits int
	// deniedSince is when this process first saw the current denial; zero when none
	// stands. denials counts the denials in a row (denied).
	deniedSince time.Time
	denials     int
	// withdrawing is set while the denied requests are being removed; Ensure orders
	// them again once they are gone.
	withdrawing bool
	// withdrawn are the UIDs of the requests withdrawn last. Until the platform reads
	// stop showing them, nothing is ordered: the library, reading a withdrawn but still
	// cached granted ClusterRequest, would create an AccessRequest referencing it, and
	// the openmcp-operator would fail on it (and back the request off) once it is gone.
	withdrawn []types.UID
	// askedAt is when this process last asked the platform again about a request
	// pending past GrantTimeout.
	askedAt time.Time
}

// grantedAccess is a full pass of Ensure that ended with the access granted: the
// grants it saw, and when.
type grantedAccess struct {
	ar, cr    grant
	access    *cluster.Access
	checkedAt time.Time
}

// grant is what a granted request's access depends on. A request changes for reasons
// that leave its grant as it was (this runtime's record annotation, the platform's
// bookkeeping in its status after the grant: at 500 workspaces the real operator's
// later status writes made every other tenant read its access Secret a second time),
// so a poll compares grants, not resource versions.
type grant struct {
	uid        types.UID
	generation int64
	// granted holds for a request granted at its generation, not being deleted.
	granted bool
	// to is the Secret an AccessRequest names, the Cluster a ClusterRequest names.
	to string
}

func accessGrant(ar *clustersv1alpha1.AccessRequest) grant {
	if ar == nil {
		return grant{}
	}
	g := grant{uid: ar.UID, generation: ar.Generation,
		granted: ar.Status.IsGranted() && ar.Status.ObservedGeneration == ar.Generation && ar.DeletionTimestamp.IsZero()}
	if ar.Status.SecretRef != nil {
		g.to = ar.Status.SecretRef.Name
	}
	return g
}

func clusterGrant(cr *clustersv1alpha1.ClusterRequest) grant {
	if cr == nil {
		return grant{}
	}
	g := grant{uid: cr.UID, generation: cr.Generation, granted: cr.Status.IsGranted() && cr.DeletionTimestamp.IsZero()}
	if cr.Status.Cluster != nil {
		g.to = cr.Status.Cluster.Namespace + "/" + cr.Status.Cluster.Name
	}
	return g
}

type cachedAccess struct {
	resourceVersion string
	access          *cluster.Access
}

// New returns a Requester creating its requests with the platform client.
func New(platform client.Client, opts Options) *Requester {
	if opts.RetryInterval == 0 {
		opts.RetryInterval = 10 * time.Second
	}
	if opts.GrantTimeout == 0 {
		opts.GrantTimeout = DefaultGrantTimeout
	}
	if opts.NotGrantedReason == "" {
		opts.NotGrantedReason = opts.WaitingReason
	}
	if opts.DeniedRetry == 0 {
		opts.DeniedRetry = 10 * opts.RetryInterval
	}
	if opts.Recheck == 0 {
		opts.Recheck = DefaultRecheck
	}
	namespaces := newNamespaceMemory(platform)
	return &Requester{opts: opts, platform: platform, namespaces: namespaces,
		lib: newLib(namespaces, opts), release: newLib(namespaces, opts),
		cache: map[types.UID]cachedAccess{}, granted: map[string]grantedAccess{}, tenants: map[string]*tenantState{},
		routed: map[client.ObjectKey]time.Time{}, records: map[string]map[string]string{}}
}

// newLib configures one instance of the clusteraccess library.
func newLib(platform client.Client, opts Options) advanced.ClusterAccessReconciler {
	lib := advanced.NewClusterAccessReconciler(platform, opts.ControllerName).
		WithRetryInterval(opts.RetryInterval).
		Register(opts.Registration)
	if opts.Labels != nil {
		lib = lib.WithManagedLabels(func(controllerName string, req reconcile.Request, reg advanced.ClusterRegistration) (string, string, map[string]string) {
			by, purpose, _ := advanced.DefaultManagedLabelGenerator(controllerName, req, reg)
			return by, purpose, opts.Labels(req)
		})
	}
	return lib
}

// NamespaceFromIdentity is the library namespace generator for requests in the tenant's
// platform namespace; Requesters pass the Identity as the library's additional data.
func NamespaceFromIdentity(_ reconcile.Request, data ...any) (string, error) {
	for _, d := range data {
		if id, ok := d.(cluster.Identity); ok {
			return id.TenantNamespace(), nil
		}
	}
	return "", fmt.Errorf("no tenant identity passed to the namespace generator")
}

// libContext bridges controller-runtime's logger into the library, which reads
// controller-utils' logger from the context (and panics in places without one).
func libContext(ctx context.Context) context.Context {
	return logging.NewContext(ctx, logging.Wrap(ctrllog.FromContext(ctx)))
}

// Ensure orders the access if needed and returns it once granted at the current
// generation. While it is not, the error is a *WaitingError.
func (r *Requester) Ensure(ctx context.Context, key Key) (*cluster.Access, error) {
	lctx := libContext(ctx)
	r.mu.Lock()
	st := r.tenants[tenantKey(key)]
	withdrawing := st != nil && st.withdrawing
	r.mu.Unlock()
	if withdrawing {
		uids := r.requestUIDs(lctx, key)
		done, err := r.Release(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("withdrawing denied %s access: %w", r.opts.Registration.ID(), err)
		}
		if !done {
			return nil, &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.opts.RetryInterval,
				Message: "withdrawing the denied request to order it again"}
		}
		r.mu.Lock()
		st := r.state(key)
		st.withdrawing, st.withdrawn = false, append(st.withdrawn, uids...)
		r.mu.Unlock()
	}
	if err := r.withdrawnGone(lctx, key); err != nil {
		return nil, err
	}
	if a, err := r.current(lctx, key); a != nil || err != nil {
		return a, err
	}
	reg := r.opts.Registration.Parameterize(key.Request, key.Identity)
	namespace, err := reg.Namespace()
	if err != nil {
		return nil, fmt.Errorf("platform namespace of %s access: %w", reg.ID(), err)
	}
	if err := r.ensureNamespace(ctx, namespace); err != nil {
		return nil, r.orderingFailed(key, err)
	}
	if err := r.routeAccessRequest(ctx, key, reg, namespace); err != nil {
		if _, waiting := AsWaiting(err); waiting {
			return nil, err
		}
		return nil, r.orderingFailed(key, err)
	}
	res, err := r.lib.Reconcile(lctx, key.Request, key.Identity)
	if err != nil {
		return nil, r.orderingFailed(key, err)
	}
	id := r.opts.Registration.ID()
	var cr *clustersv1alpha1.ClusterRequest
	if r.opts.Registration.ClusterRequestAvailable() {
		cr, err = r.lib.ClusterRequest(lctx, key.Request, id, key.Identity)
		if apierrors.IsNotFound(err) {
			cr, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading ClusterRequest: %w", err)
		}
		if cr != nil && cr.Status.IsDenied() {
			return nil, r.denied(key, fmt.Sprintf("ClusterRequest %s/%s was denied: %s", cr.Namespace, cr.Name, deniedMessage(cr.Status.Conditions)))
		}
	}
	ar, err := r.accessRequest(lctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading AccessRequest: %w", err)
	}
	if ar != nil && ar.Status.IsDenied() {
		return nil, r.denied(key, fmt.Sprintf("AccessRequest %s/%s was denied: %s", ar.Namespace, ar.Name, deniedMessage(ar.Status.Conditions)))
	}
	if res.RequeueAfter > 0 || ar == nil || !ar.Status.IsGranted() || ar.Status.ObservedGeneration != ar.Generation {
		// One message for every step of the wait (ClusterRequest pending, then
		// AccessRequest pending): a message per step costs the tenant's object a status
		// write each, and says nothing a tenant can act on. What the platform says is
		// wrong with a request (an invalid reference, a configuration problem) is
		// different: the tenant reads it on the object.
		msg := r.waitingMessage(key)
		says := platformProblem(cr, ar)
		retry := r.waitingRetry(key)
		if pending := pendingRequest(cr, ar); pending != nil {
			left := r.opts.GrantTimeout - time.Since(pending.GetCreationTimestamp().Time)
			if left <= 0 {
				return nil, r.notGranted(ctx, key, pending, says, retry)
			}
			// Look again when the timeout ends, not a backoff later.
			retry = min(retry, left)
		}
		if says != "" {
			msg += "; the platform says: " + says
		}
		return nil, &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: retry, Message: msg}
	}
	r.mu.Lock()
	delete(r.tenants, tenantKey(key))
	r.mu.Unlock()
	a, err := r.fromAccessRequest(ctx, ar)
	if err != nil {
		return nil, err
	}
	g := grantedAccess{ar: accessGrant(ar), cr: clusterGrant(cr), access: a, checkedAt: time.Now()}
	r.mu.Lock()
	r.granted[tenantKey(key)] = g
	r.mu.Unlock()
	return a, nil
}

// orderingFailed wraps an error of ordering the tenant's requests. The tenant's
// namespace may be gone (namespaceMemory): the next pass reads it again.
func (r *Requester) orderingFailed(key Key, err error) error {
	r.namespaces.forget(key.Identity.TenantNamespace())
	return fmt.Errorf("ordering %s access: %w", r.opts.Registration.ID(), err)
}

// current returns the tenant's access from memory when nothing it depends on has
// changed since a full pass ended granted: the same AccessRequest (and ClusterRequest)
// with the same grant in the informer cache (grant), within Recheck and before the
// token's renewal time. A poll of a served object then costs no request to the
// platform; the full pass reads the access Secret past the cache.
func (r *Requester) current(ctx context.Context, key Key) (*cluster.Access, error) {
	if r.opts.Recheck < 0 {
		return nil, nil
	}
	r.mu.Lock()
	g, ok := r.granted[tenantKey(key)]
	r.mu.Unlock()
	now := time.Now()
	if !ok || now.Sub(g.checkedAt) >= r.opts.Recheck || (!g.access.RenewAt.IsZero() && !now.Before(g.access.RenewAt)) {
		return nil, nil
	}
	ar, err := r.accessRequest(ctx, key)
	if err != nil || accessGrant(ar) != g.ar {
		return nil, nil // the full pass reads and reports it
	}
	if r.opts.Registration.ClusterRequestAvailable() {
		cr, err := r.lib.ClusterRequest(ctx, key.Request, r.opts.Registration.ID(), key.Identity)
		if err != nil || clusterGrant(cr) != g.cr {
			return nil, nil
		}
	}
	return g.access, nil
}

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

func tenantKey(key Key) string { return key.Request.String() + "|" + key.Identity.String() }

// state returns the tenant's state, creating it. Call with r.mu held.
func (r *Requester) state(key Key) *tenantState {
	st, ok := r.tenants[tenantKey(key)]
	if !ok {
		st = &tenantState{}
		r.tenants[tenantKey(key)] = st
	}
	return st
}

// requestUIDs are the UIDs of the tenant's ClusterRequest (if the registration has
// one) and AccessRequest, as the platform reads show them now.
func (r *Requester) requestUIDs(ctx context.Context, key Key) []types.UID {
	var uids []types.UID
	if r.opts.Registration.ClusterRequestAvailable() {
		if cr, err := r.lib.ClusterRequest(ctx, key.Request, r.opts.Registration.ID(), key.Identity); err == nil && cr != nil {
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

// Release deletes the tenant's requests. It reports done once they are gone.
func (r *Requester) Release(ctx context.Context, key Key) (bool, error) {
	lctx := libContext(ctx)
	ar, _ := r.accessRequest(lctx, key)
	res, err := r.release.ReconcileDelete(lctx, key.Request, key.Identity)
	if err != nil {
		return false, fmt.Errorf("releasing %s access: %w", r.opts.Registration.ID(), err)
	}
	if res.RequeueAfter > 0 {
		return false, nil
	}
	r.mu.Lock()
	delete(r.granted, tenantKey(key))
	delete(r.records, tenantKey(key))
	if ar != nil {
		delete(r.cache, ar.UID)
		delete(r.routed, client.ObjectKeyFromObject(ar))
	}
	if st := r.tenants[tenantKey(key)]; st != nil {
		st.waits = 0
	}
	r.mu.Unlock()
	return true, nil
}

// fromAccessRequest reads the access Secret into a client, reusing the cached one while
// the Secret is unchanged.
func (r *Requester) fromAccessRequest(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*cluster.Access, error) {
	if ar.Status.SecretRef == nil {
		return nil, &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.opts.RetryInterval,
			Message: fmt.Sprintf("AccessRequest %s/%s is granted but names no Secret yet", ar.Namespace, ar.Name)}
	}
	s := &corev1.Secret{}
	if err := r.platform.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, s); err != nil {
		return nil, fmt.Errorf("reading access Secret of AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	r.mu.Lock()
	c, ok := r.cache[ar.UID]
	r.mu.Unlock()
	if ok && c.resourceVersion == s.ResourceVersion {
		return c.access, nil
	}
	kcfg := s.Data[clustersv1alpha1.SecretKeyKubeconfig]
	if len(kcfg) == 0 {
		return nil, fmt.Errorf("access Secret %s/%s has no %q key", s.Namespace, s.Name, clustersv1alpha1.SecretKeyKubeconfig)
	}
	a, err := FromKubeconfig(kcfg, r.opts.Scheme, r.opts.Tune)
	if err != nil {
		return nil, fmt.Errorf("access Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	a.RenewAt = RenewAt(s.Data)
	r.mu.Lock()
	r.cache[ar.UID] = cachedAccess{resourceVersion: s.ResourceVersion, access: a}
	r.mu.Unlock()
	return a, nil
}

// RenewAt is when the platform renews the token of an access Secret: 80 % of the
// lifetime between the Secret's creationTimestamp and expirationTimestamp keys (Unix
// seconds, as openMCP's AccessRequest controller writes them). Zero when either key is
// missing or malformed: such a credential is treated as not expiring.
func RenewAt(data map[string][]byte) time.Time {
	created, err1 := strconv.ParseInt(string(data[clustersv1alpha1.SecretKeyCreationTimestamp]), 10, 64)
	expires, err2 := strconv.ParseInt(string(data[clustersv1alpha1.SecretKeyExpirationTimestamp]), 10, 64)
	if err1 != nil || err2 != nil || expires <= created || created <= 0 {
		return time.Time{}
	}
	return kubeconfig.RenewAt(time.Unix(created, 0), time.Unix(expires, 0))
}

// FromKubeconfig builds an Access from raw kubeconfig bytes.
func FromKubeconfig(kubeconfig []byte, scheme *runtime.Scheme, tune func(*rest.Config)) (*cluster.Access, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		// The parse error can quote the file; never pass it on.
		return nil, fmt.Errorf("kubeconfig does not parse")
	}
	if tune != nil {
		tune(cfg)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client for %s: %w", cfg.Host, err)
	}
	return &cluster.Access{Client: c, Config: cfg, Kubeconfig: kubeconfig}, nil
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

// Lookup returns the tenant's access if it was granted, without ordering anything: the
// deletion path uses it so that a tenant being deleted never causes new requests.
func (r *Requester) Lookup(ctx context.Context, key Key) (*cluster.Access, error) {
	ar, err := r.accessRequest(libContext(ctx), key)
	if err != nil {
		return nil, fmt.Errorf("reading AccessRequest: %w", err)
	}
	if ar == nil || !ar.DeletionTimestamp.IsZero() || !ar.Status.IsGranted() || ar.Status.SecretRef == nil {
		return nil, nil
	}
	a, err := r.fromAccessRequest(ctx, ar)
	if apierrors.IsNotFound(err) {
		// The platform already revoked it.
		return nil, nil
	}
	return a, err
}

// accessRequest reads the tenant's AccessRequest; nil when there is none.
func (r *Requester) accessRequest(ctx context.Context, key Key) (*clustersv1alpha1.AccessRequest, error) {
	ar, err := r.lib.AccessRequest(ctx, key.Request, r.opts.Registration.ID(), key.Identity)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return ar, err
}

// Record keeps value in the annotation of the tenant's AccessRequest, patching it only
// when it differs, so a tenant whose value does not change costs no writes. Before the
// AccessRequest exists the value is kept in memory and written with the request when
// this Requester creates it (routeAccessRequest): a tenant's first object then costs no
// patch of its own. While the request is being deleted there is nothing to keep it with
// and Record does nothing. The engine keeps its record of the object it hands the
// provider this way (engine.RecordAnnotation): it goes when the request goes.
func (r *Requester) Record(ctx context.Context, key Key, annotation, value string) error {
	ar, err := r.accessRequest(libContext(ctx), key)
	if err != nil {
		return fmt.Errorf("reading AccessRequest: %w", err)
	}
	if ar == nil {
		r.mu.Lock()
		if r.records[tenantKey(key)] == nil {
			r.records[tenantKey(key)] = map[string]string{}
		}
		r.records[tenantKey(key)][annotation] = value
		r.mu.Unlock()
		return nil
	}
	// The request exists: what was kept for its create has served (or the library
	// created it without), and from here on the request holds the value.
	r.mu.Lock()
	delete(r.records, tenantKey(key))
	r.mu.Unlock()
	if !ar.DeletionTimestamp.IsZero() || ar.Annotations[annotation] == value {
		return nil
	}
	base := ar.DeepCopy()
	if ar.Annotations == nil {
		ar.Annotations = map[string]string{}
	}
	ar.Annotations[annotation] = value
	if err := r.platform.Patch(ctx, ar, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("annotating AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	return nil
}

// recordsOf returns a copy of what Record keeps for the tenant's next AccessRequest.
func (r *Requester) recordsOf(key Key) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.records[tenantKey(key)])
}
