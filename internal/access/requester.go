package access

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/openmcp-project/controller-utils/pkg/logging"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
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
	// A granted access whose requests are unchanged is handed out from memory, without
	// the library's pass over the requests and without reading the access Secret
	// again, until the token's renewal time (docs/design/scale.md, "The access
	// recheck"). The requests are read from the informer
	// cache, so a change to either (a new generation, a denial, a deletion) ends it at
	// once. Recheck is how long that lasts for a credential whose Secret names no
	// expiry: default 10 minutes; negative takes the full pass on every Ensure.
	Recheck time.Duration
	// Adopt gives existing requests of the same controller and registration the
	// labels this Requester adds beyond the library's, before the library looks at
	// them (adopt.go): set while taking over a provider from opencontrolplane-runtime.
	Adopt bool
	// DeniedRetry is how long a denied request stands before it is withdrawn and
	// ordered again, doubling with each denial in a row up to an hour. A platform's
	// denial is final for that request, but its reason (quota, policy, capacity) often
	// is not. Default 10 × RetryInterval.
	DeniedRetry time.Duration
	// Namespaces is the memory of existing tenant namespaces this Requester shares
	// with the others ordering on the same platform (namespaces.go); nil: one of its
	// own.
	Namespaces *Namespaces
}

// DefaultRecheck is Options.Recheck's default.
const DefaultRecheck = 10 * time.Minute

// DefaultGrantTimeout is Options.GrantTimeout's default.
const DefaultGrantTimeout = 15 * time.Minute

// Key names one tenant's request: the library's reconcile.Request (its Name and
// Namespace derive the request name and labels) and the tenant identity (which derives
// the platform namespace).
type Key struct {
	Request  reconcile.Request
	Identity cluster.Identity
	// Data is further data for the registration's generators, after the identity (a
	// further cluster's ClusterRequest spec derived from the object and the
	// ProviderConfig); the tenant is the same whatever it holds.
	Data []any
}

// data is what the library's generators get: the identity, then Data.
func (k Key) data() []any { return append([]any{k.Identity}, k.Data...) }

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
	// unrouted remembers since when a tenant's granted ClusterRequest names a Cluster
	// the informer cache does not show yet (awaitRoute), by AccessRequest.
	unrouted map[client.ObjectKey]time.Time
	// records holds, by tenantKey, the annotations Record was asked to keep while the
	// tenant had no AccessRequest, for routeAccessRequest to create it with; only
	// until Record sees the request.
	records map[string]map[string]string
}

// maxWaitingRetry caps the backoff between looks at a pending request. The grant
// itself wakes the tenant through the engine's watch; the looks are a safety net, and
// at a fixed RetryInterval hundreds of pending tenants keep the work queue full of them
// while the grants wait behind (docs/design/measured.md).
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
	namespaces := newNamespaceMemory(platform, opts.Namespaces)
	return &Requester{opts: opts, platform: platform, namespaces: namespaces,
		lib: newLib(namespaces, opts), release: newLib(namespaces, opts),
		cache: map[types.UID]cachedAccess{}, granted: map[string]grantedAccess{}, tenants: map[string]*tenantState{},
		routed: map[client.ObjectKey]time.Time{}, unrouted: map[client.ObjectKey]time.Time{}, records: map[string]map[string]string{}}
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
	reg := r.opts.Registration.Parameterize(key.Request, key.data()...)
	namespace, err := reg.Namespace()
	if err != nil {
		return nil, fmt.Errorf("platform namespace of %s access: %w", reg.ID(), err)
	}
	if err := r.ensureNamespace(ctx, key, reg, namespace); err != nil {
		return nil, r.orderingFailed(key, err)
	}
	if err := r.routeAccessRequest(ctx, key, reg, namespace); err != nil {
		if _, waiting := AsWaiting(err); waiting {
			return nil, err
		}
		return nil, r.orderingFailed(key, err)
	}
	if r.opts.Adopt {
		if err := r.adopt(ctx, key, reg, namespace); err != nil {
			return nil, r.orderingFailed(key, err)
		}
	}
	res, err := r.lib.Reconcile(lctx, key.Request, key.data()...)
	if err != nil {
		return nil, r.orderingFailed(key, err)
	}
	id := r.opts.Registration.ID()
	var cr *clustersv1alpha1.ClusterRequest
	if r.opts.Registration.ClusterRequestAvailable() {
		cr, err = r.lib.ClusterRequest(lctx, key.Request, id, key.data()...)
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

// Release deletes the tenant's requests. It reports done once they are gone.
func (r *Requester) Release(ctx context.Context, key Key) (bool, error) {
	lctx := libContext(ctx)
	ar, _ := r.accessRequest(lctx, key)
	res, err := r.release.ReconcileDelete(lctx, key.Request, key.data()...)
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
