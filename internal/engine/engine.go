// One file, one idea: the reconcile of one Service object, create/update and delete
// paths side by side, so that their ordering of accesses reads as one sequence.

package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/providerconfig"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Options configure an Engine.
type Options[T provider.Object] struct {
	// NewObject returns an empty Service object.
	NewObject func() T
	// Finalizer is `<service group>/finalizer`, or what a migration declared.
	Finalizer string
	// WrittenReason, when set, is the Ready reason written on the object for the
	// engine's reason (a migration's old vocabulary, see package migration). The
	// engine works with its own reasons throughout; only the status write and the
	// comparison of what is stored use the written ones.
	WrittenReason func(string) string
	// Hold, when set, is asked before each reconcile whether to wait (and why): while
	// a provider's old binary may still run during its replacement (package handover),
	// nothing is read or written beyond the object, and it is looked at again after
	// HoldRetry.
	Hold      func(context.Context) (bool, string)
	HoldRetry time.Duration
	// References are the platform cluster's objects (Secrets, ConfigMaps) the
	// ProviderConfig or the Service objects name: a change to one reconciles the
	// objects that use it (references.go).
	References []Reference[T]
	// ProviderConfig loads the ProviderConfig.
	ProviderConfig *providerconfig.Loader
	// Reconciler is the provider.
	Reconciler provider.Reconciler[T]
	// Tenancy is the mode.
	Tenancy Tenancy[T]
	// Workload orders workload clusters; nil when the provider runs no workers there.
	Workload WorkloadAccess
	// Additional order the further clusters the provider declared, by registration
	// ID: ordered after the workload cluster, released before it. Their keys carry an
	// ObjectData for the registrations' generators.
	Additional map[string]WorkloadAccess
	// PlatformReader reads the platform cluster for the provider (cluster.PlatformFromCtx).
	PlatformReader client.Reader
	// ProviderNamespace is the provider's own namespace on the platform cluster.
	ProviderNamespace string
	// PlatformWriter, when set, is the platform client (its reads past every cache)
	// each tenant's cluster.PlatformWriterFromCtx confines to the tenant's platform
	// namespace: set when the provider declared platform permissions.
	PlatformWriter client.Client
	// PlatformWatches are kinds the provider writes with the platform writer whose
	// changes wake the tenant's object: the platform manager watches them (its cache
	// must hold only those labelled with the provider's managed-by label), and a change
	// is mapped back to the tenant by the labels the writer put on it (TenantLabels,
	// the tenancy's RequestsFor).
	PlatformWatches []client.Object
	// PlatformCache is the platform manager's cache, from which the platform writer
	// reads the kinds of PlatformWatches.
	PlatformCache client.Reader
	// TenantLabels are the labels that name a tenant on the platform, as on its
	// requests; nil where the mode has none (platform-service mode).
	TenantLabels func(cluster.Identity) map[string]string
	// KubeconfigSecrets, when set, writes the end-user kubeconfigs that no platform
	// Secret holds (kcp mode's minted tokens) into Secrets in the tenant's platform
	// namespace, for cluster.Access.Secret (see secrets.go). Set with PlatformWriter in
	// the modes whose end-user access is not an AccessRequest.
	KubeconfigSecrets client.Client
	// Provider is the provider's name: the `provider` label of the runtime's metrics.
	Provider string
	// EventSource is the reporting controller of the events the engine records on
	// Service objects (on transitions, see observe.go); empty records none.
	EventSource string
	// Replica is the identity of this replica, the reporting instance of its events.
	Replica string
	// FieldOwner, if set, is the field manager of the engine's writes to Service
	// objects. Without it the API server takes the user agent's, which kcp's virtual
	// workspace replaces with its own ("kcp").
	FieldOwner string
	// ProgressInterval is how soon an object in progress is looked at again when the
	// provider names no interval. Default 5s.
	ProgressInterval time.Duration
	// LiveReader returns a reader of the cluster that bypasses every cache (see
	// stillHeld). Default: a client on the cluster's config, HTTP client and REST
	// mapper; not GetAPIReader, which kcp's multicluster-provider answers from its
	// cache (docs/design/kcp-mode.md).
	LiveReader func(ctrlcluster.Cluster) (client.Reader, error)
}

// DirectClient returns a client of cl that no cache stands in front of. It shares
// cl's HTTP client and REST mapper, so it costs no new connections and no discovery.
func DirectClient(cl ctrlcluster.Cluster, scheme *runtime.Scheme) (client.Client, error) {
	return client.New(cl.GetConfig(), client.Options{Scheme: scheme, HTTPClient: cl.GetHTTPClient(), Mapper: cl.GetRESTMapper()})
}

// directReader is the default LiveReader.
func directReader(cl ctrlcluster.Cluster) (client.Reader, error) {
	return DirectClient(cl, cl.GetScheme())
}

// ObjectData is the data a further cluster's registration is handed with the
// tenant's identity: the object and the ProviderConfig it is served with (the
// generators of opencontrolplane-runtime's AdditionalDataGenerators read them).
type ObjectData[T provider.Object] struct {
	Object         T
	ProviderConfig provider.ProviderConfig
}

func withData[T provider.Object](key access.Key, obj T, pc provider.ProviderConfig) access.Key {
	key.Data = []any{ObjectData[T]{Object: obj, ProviderConfig: pc}}
	return key
}

// Engine reconciles Service objects of one type in one mode.
type Engine[T provider.Object] struct {
	opts     Options[T]
	secrets  *kubeconfigSecrets // nil without Options.KubeconfigSecrets
	clusters *clusterSet
	// known are the clusters the provider knows, served here or by another replica
	// (Present); nil means those served here.
	known    ClusterLister
	reported *reported // transitions reported recently (observe.go)
	removed  *removed  // objects whose provider Delete has finished (delete)
	written  *writtenStatuses
	recorder *recorder // events (events.go)
	// platformCache is where the platform writers read the watched kinds from.
	platformCache platformCache
}

// New returns an Engine.
func New[T provider.Object](opts Options[T], clusters *clusterSet) *Engine[T] {
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = 5 * time.Second
	}
	if opts.LiveReader == nil {
		opts.LiveReader = directReader
	}
	e := &Engine[T]{opts: opts, clusters: clusters, reported: newReported(), removed: newRemoved(), written: newWrittenStatuses(),
		platformCache: newPlatformCache(opts.PlatformCache, opts.PlatformWatches),
		recorder:      newRecorder(opts.EventSource, opts.Replica)}
	if opts.KubeconfigSecrets != nil {
		e.secrets = newKubeconfigSecrets(opts.KubeconfigSecrets, opts.Provider)
	}
	return e
}

// Reconcile implements the multicluster reconciler.
func (e *Engine[T]) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	o := e.begin()
	res, err := e.reconcile(ctx, req, o)
	e.end(ctx, o, err)
	return res, err
}

// reconcile is one reconcile; it tells o what it read, for metrics and events.
func (e *Engine[T]) reconcile(ctx context.Context, req mcreconcile.Request, o *observation[T]) (reconcile.Result, error) {
	if e.opts.Hold != nil {
		if held, why := e.opts.Hold(ctx); held {
			log.FromContext(ctx).V(1).Info("holding the reconcile", "why", why)
			return reconcile.Result{RequeueAfter: e.opts.HoldRetry}, nil
		}
	}
	cl, ctx, release, ok := e.clusters.acquire(ctx, string(req.ClusterName))
	if !ok {
		// The workspace unbound or disappeared after the request was queued (its
		// platform-side leftovers are the orphan sweep's job), or another replica
		// serves it now.
		return reconcile.Result{}, nil
	}
	// The reconcile ends with the workspace's engagement: a replica handing the
	// workspace over waits for it (Drain) before the next one may start.
	defer release()
	obj := e.opts.NewObject()
	if err := cl.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) || errors.Is(err, multicluster.ErrClusterNotFound) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading %s: %w", req.NamespacedName, err)
	}
	t := e.opts.Tenancy.Target(string(req.ClusterName), cl, obj)
	o.saw(t, e.opts.Finalizer)
	// The controller's logger already carries mode, workspace, object and the
	// identity derived from the request (see logConstructor).
	logger := log.FromContext(ctx)
	if id := t.Identity.String(); id != e.requestIdentity(req) {
		logger = logger.WithValues("servedIdentity", id)
	}
	ctx = log.IntoContext(ctx, logger)

	switch obj.GetAnnotations()[openmcpconst.OperationAnnotation] {
	case openmcpconst.OperationAnnotationValueIgnore:
		logger.V(1).Info("skipping: operation annotation says ignore")
		return reconcile.Result{}, nil
	case openmcpconst.OperationAnnotationValueReconcile:
		// A one-shot request for a reconcile: remove it first, so that a failure below
		// does not leave it to fire again.
		base := obj.DeepCopyObject().(T)
		anns := obj.GetAnnotations()
		delete(anns, openmcpconst.OperationAnnotation)
		obj.SetAnnotations(anns)
		if err := cl.GetClient().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
			return reconcile.Result{}, fmt.Errorf("removing operation annotation: %w", err)
		}
	}

	w := &writer[T]{client: cl.GetClient(), obj: obj, read: obj.DeepCopyObject().(T), identity: t.Identity.String(),
		written: e.written, readVersion: obj.GetResourceVersion(), reason: e.opts.WrittenReason}

	pc, pcErr := e.opts.ProviderConfig.Load(ctx)
	o.loaded(pc, pcErr)
	if !obj.GetDeletionTimestamp().IsZero() {
		res, err := e.delete(ctx, t, w, pc, pcErr)
		return w.finish(ctx, res, err)
	}
	res, err := e.createOrUpdate(ctx, t, w, pc, pcErr)
	return w.finish(ctx, res, err)
}

// createOrUpdate runs the create/update path and records the outcome in the status.
func (e *Engine[T]) createOrUpdate(ctx context.Context, t Target[T], w *writer[T], pc provider.ProviderConfig, pcErr error) (reconcile.Result, error) {
	obj := t.Object
	st := obj.GetServiceStatus()
	if pcErr != nil {
		return e.providerConfigProblem(st, obj.GetGeneration(), pcErr)
	}
	if err := e.opts.Tenancy.Admit(ctx, t); err != nil {
		return e.waitingOrError(st, obj.GetGeneration(), err)
	}
	if !controllerutil.ContainsFinalizer(obj, e.opts.Finalizer) {
		base := obj.DeepCopyObject().(T)
		controllerutil.AddFinalizer(obj, e.opts.Finalizer)
		if err := t.Cluster.GetClient().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}
	tenant, err := e.resolve(ctx, t, pc)
	if err != nil {
		return e.waitingOrError(st, obj.GetGeneration(), err)
	}
	res, err := e.callWith(ctx, w, tenant, "CreateOrUpdate", e.opts.Reconciler.CreateOrUpdate)
	if apierrors.IsConflict(err) {
		// The provider updated an object it read from a cache a moment behind (the
		// platform writer's watched kinds): not the tenant's concern; again at once.
		log.FromContext(ctx).V(1).Info("provider's write conflicted; calling it again", "error", err.Error())
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return providerFailed(st, obj.GetGeneration(), "CreateOrUpdate", err, v1alpha1.PhaseProgressing)
	}
	if res.InProgress {
		msg := res.Message
		if msg == "" {
			msg = "installation in progress"
		}
		setReady(st, obj.GetGeneration(), metav1.ConditionFalse, reasonOr(res.Reason, v1alpha1.ReasonProgressing), msg, v1alpha1.PhaseProgressing)
		return reconcile.Result{RequeueAfter: orDefault(res.RequeueAfter, e.opts.ProgressInterval)}, nil
	}
	msg := res.Message
	if msg == "" {
		msg = "service is installed"
	}
	setReady(st, obj.GetGeneration(), metav1.ConditionTrue, v1alpha1.ReasonReady, msg, v1alpha1.PhaseReady)
	// Come back before any credential handed to the provider is renewed, whatever the
	// poll interval: the provider must pass the new kubeconfig to its workers.
	next := untilRenewal(orDefault(res.RequeueAfter, providerconfig.PollInterval(pc)), e.opts.ProgressInterval, time.Now(), tenant)
	return reconcile.Result{RequeueAfter: next}, nil
}

// delete runs the deletion sequence: provider Delete, workload access, end-user
// access, finalizer.
func (e *Engine[T]) delete(ctx context.Context, t Target[T], w *writer[T], pc provider.ProviderConfig, pcErr error) (reconcile.Result, error) {
	obj := t.Object
	st := obj.GetServiceStatus()
	if !controllerutil.ContainsFinalizer(obj, e.opts.Finalizer) {
		return reconcile.Result{}, nil
	}
	if held, err := e.stillHeld(ctx, t); err != nil {
		return reconcile.Result{}, err
	} else if !held {
		e.removed.forget(obj.GetUID())
		return reconcile.Result{}, errGone
	}
	if pcErr != nil {
		// Without its configuration the provider cannot tell what to remove; keep the
		// finalizer and say why, rather than tearing down blindly.
		return e.providerConfigProblem(st, obj.GetGeneration(), pcErr)
	}
	setReady(st, obj.GetGeneration(), metav1.ConditionFalse, v1alpha1.ReasonDeleting, "removing the service", v1alpha1.PhaseTerminating)
	// Once the provider has removed its part, the accesses are released over several
	// reconciles; the provider is not asked again meanwhile. Asked again, it would be
	// handed an access whose AccessRequest the platform is revoking while this
	// replica's cache still shows it granted (a TestBinary run saw the end-user
	// cluster refuse the echo provider's repeated Delete: forbidden).
	if _, removed := e.removed.get(obj.GetUID()); !removed {
		if finished, res, err := e.deleteWithProvider(ctx, t, w, pc); !finished {
			return res, err
		}
		e.revokeWorker(ctx, t)
		e.removed.remember(obj.GetUID())
	}
	for _, id := range slices.Sorted(maps.Keys(e.opts.Additional)) {
		done, err := e.opts.Additional[id].Release(ctx, withData(t.Key, obj, pc))
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("releasing the %s cluster: %w", id, err)
		}
		if !done {
			setReady(st, obj.GetGeneration(), metav1.ConditionFalse, v1alpha1.ReasonDeleting, "releasing the "+id+" cluster", v1alpha1.PhaseTerminating)
			return reconcile.Result{RequeueAfter: e.opts.ProgressInterval}, nil
		}
	}
	if e.opts.Workload != nil {
		done, err := e.opts.Workload.Release(ctx, t.Key)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !done {
			setReady(st, obj.GetGeneration(), metav1.ConditionFalse, v1alpha1.ReasonDeleting, "releasing the workload cluster", v1alpha1.PhaseTerminating)
			return reconcile.Result{RequeueAfter: e.opts.ProgressInterval}, nil
		}
	}
	if err := e.secrets.remove(ctx, t.Identity.TenantNamespace()); err != nil {
		return e.waitingOrError(st, obj.GetGeneration(), err)
	}
	done, err := e.opts.Tenancy.ReleaseEndUser(ctx, t)
	if left := (*access.LeftBehind)(nil); errors.As(err, &left) {
		// The object is about to go: the event and the log are where this stays.
		log.FromContext(ctx).Info("deletion left objects to the tenant", "leftBehind", left.Message)
		e.emit(ctx, &t, corev1.EventTypeWarning, EventLeftBehind, "Delete", left.Message)
		err = nil
	}
	if err != nil {
		return e.waitingOrError(st, obj.GetGeneration(), err)
	}
	if !done {
		setReady(st, obj.GetGeneration(), metav1.ConditionFalse, v1alpha1.ReasonDeleting, "releasing end-user cluster access", v1alpha1.PhaseTerminating)
		return reconcile.Result{RequeueAfter: e.opts.ProgressInterval}, nil
	}
	base := obj.DeepCopyObject().(T)
	controllerutil.RemoveFinalizer(obj, e.opts.Finalizer)
	if err := t.Cluster.GetClient().Patch(ctx, obj, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	e.removed.forget(obj.GetUID())
	return reconcile.Result{}, errGone
}

// deleteWithProvider hands the provider its clusters as they stand and calls its
// Delete. It returns true once the provider has removed everything of its own;
// otherwise the reconcile's result and error.
func (e *Engine[T]) deleteWithProvider(ctx context.Context, t Target[T], w *writer[T], pc provider.ProviderConfig) (bool, reconcile.Result, error) {
	obj := t.Object
	st := obj.GetServiceStatus()
	tenant := e.newTenant(t.Identity, pc)
	mcp, err := e.opts.Tenancy.LookupEndUser(ctx, t)
	if err != nil {
		return waiting(e.waitingOrError(st, obj.GetGeneration(), err))
	}
	tenant.MCP, tenant.Worker = mcp, nil
	// Delete may wait for a child object (a HelmRelease's uninstall) that reads the
	// end-user kubeconfig from its Secret: the Secret stays current until the access
	// is released below.
	if err := e.secrets.publish(ctx, t.Identity.TenantNamespace(), tenant); err != nil {
		return waiting(e.waitingOrError(st, obj.GetGeneration(), err))
	}
	if e.opts.Workload != nil {
		wl, err := e.opts.Workload.Lookup(ctx, t.Key)
		if err != nil {
			return waiting(e.waitingOrError(st, obj.GetGeneration(), err))
		}
		tenant.Workload = wl
	}
	for id, a := range e.opts.Additional {
		acc, err := a.Lookup(ctx, withData(t.Key, obj, pc))
		if err != nil {
			return waiting(e.waitingOrError(st, obj.GetGeneration(), err))
		}
		if acc != nil {
			if tenant.Additional == nil {
				tenant.Additional = map[string]*cluster.Access{}
			}
			tenant.Additional[id] = acc
		}
	}
	tenant.Deletion = &cluster.Deletion{EndUser: reachOf(tenant.MCP != nil, true), Workload: reachOf(tenant.Workload != nil, e.opts.Workload != nil)}
	res, err := e.callWith(ctx, w, tenant, "Delete", e.opts.Reconciler.Delete)
	if err != nil {
		return waiting(providerFailed(st, obj.GetGeneration(), "Delete", err, v1alpha1.PhaseTerminating))
	}
	if res.InProgress {
		if res.Message != "" {
			setReady(st, obj.GetGeneration(), metav1.ConditionFalse, reasonOr(res.Reason, v1alpha1.ReasonDeleting), res.Message, v1alpha1.PhaseTerminating)
		}
		return false, reconcile.Result{RequeueAfter: orDefault(res.RequeueAfter, e.opts.ProgressInterval)}, nil
	}
	return true, reconcile.Result{}, nil
}

// revokeWorker revokes the worker's own end-user credential as soon as the provider
// has removed the worker: releasing the workload and additional clusters first waits
// on the platform, seconds to minutes, and a worker's token is the credential most
// exposed (it lives on a shared workload cluster). Best effort: ReleaseEndUser removes
// it again, and waits for it, before the finalizer goes.
func (e *Engine[T]) revokeWorker(ctx context.Context, t Target[T]) {
	wt, ok := e.opts.Tenancy.(WorkerTenancy[T])
	if !ok {
		return
	}
	if err := wt.RevokeWorker(ctx, t); err != nil {
		log.FromContext(ctx).Info("revoking the worker's credential failed; releasing the end-user access retries it", "error", err.Error())
	}
}

// waiting is deleteWithProvider's answer for a deletion that goes on later.
func waiting(res reconcile.Result, err error) (bool, reconcile.Result, error) { return false, res, err }

// stillHeld reads the object past the cache and reports whether it still carries our
// finalizer. The cache keeps a released object until the watch delivers its deletion,
// and a reconcile queued meanwhile (a platform event maps to every object of the
// tenant) would otherwise release the tenant's accesses again, after its successor in
// the workspace, or a recreated object of the same name, had already ordered new ones.
// Once this read sees the finalizer, nobody else can remove it before this reconcile
// ends: a key is never reconciled twice at once.
func (e *Engine[T]) stillHeld(ctx context.Context, t Target[T]) (bool, error) {
	reader, err := e.opts.LiveReader(t.Cluster)
	if err != nil {
		return false, fmt.Errorf("reader past the cache: %w", err)
	}
	live := e.opts.NewObject()
	if err := reader.Get(ctx, client.ObjectKeyFromObject(t.Object), live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s past the cache: %w", client.ObjectKeyFromObject(t.Object), err)
	}
	return live.GetUID() == t.Object.GetUID() && controllerutil.ContainsFinalizer(live, e.opts.Finalizer), nil
}

// resolve records the object for the orphan sweep (orphan.go), then orders and
// returns every cluster the provider needs.
func (e *Engine[T]) resolve(ctx context.Context, t Target[T], pc provider.ProviderConfig) (*cluster.Tenant, error) {
	tenant := e.newTenant(t.Identity, pc)
	mcp, err := e.opts.Tenancy.EndUser(ctx, t)
	if err != nil {
		return nil, err
	}
	tenant.MCP, tenant.Worker = mcp, mcp
	if wt, ok := e.opts.Tenancy.(WorkerTenancy[T]); ok {
		worker, err := wt.EndUserWorker(ctx, t)
		if err != nil {
			return nil, err
		}
		if worker != nil {
			tenant.Worker = worker
		}
	}
	// Recorded before the workload access is ordered: the record then goes onto the
	// AccessRequest when it is created, without a patch of its own (Recorder).
	if err := e.remember(ctx, t); err != nil {
		return nil, err
	}
	if e.opts.Workload != nil {
		wl, err := e.opts.Workload.Ensure(ctx, t.Key)
		if err != nil {
			return nil, err
		}
		tenant.Workload = wl
	}
	for _, id := range slices.Sorted(maps.Keys(e.opts.Additional)) {
		a, err := e.opts.Additional[id].Ensure(ctx, withData(t.Key, t.Object, pc))
		if err != nil {
			return nil, err
		}
		if tenant.Additional == nil {
			tenant.Additional = map[string]*cluster.Access{}
		}
		tenant.Additional[id] = a
	}
	if err := e.secrets.publish(ctx, t.Identity.TenantNamespace(), tenant); err != nil {
		return nil, err
	}
	return tenant, nil
}

func (e *Engine[T]) providerConfigProblem(st *v1alpha1.ServiceStatus, gen int64, err error) (reconcile.Result, error) {
	reason := v1alpha1.ReasonRuntimeError
	var invalid *providerconfig.InvalidError
	switch {
	case errors.Is(err, providerconfig.ErrMissing):
		reason = v1alpha1.ReasonProviderConfigMissing
	case errors.As(err, &invalid):
		reason = v1alpha1.ReasonProviderConfigInvalid
	default:
		setReady(st, gen, metav1.ConditionFalse, reason, err.Error(), phaseFor(st))
		return reconcile.Result{}, err
	}
	// The ProviderConfig watch brings every object back when it is fixed.
	setReady(st, gen, metav1.ConditionFalse, reason, err.Error(), phaseFor(st))
	return reconcile.Result{}, nil
}

func (e *Engine[T]) waitingOrError(st *v1alpha1.ServiceStatus, gen int64, err error) (reconcile.Result, error) {
	if w, ok := access.AsWaiting(err); ok {
		setReady(st, gen, metav1.ConditionFalse, w.Reason, w.Message, phaseFor(st))
		return reconcile.Result{RequeueAfter: w.RequeueAfter}, nil
	}
	setReady(st, gen, metav1.ConditionFalse, v1alpha1.ReasonRuntimeError, err.Error(), phaseFor(st))
	return reconcile.Result{}, err
}

func phaseFor(st *v1alpha1.ServiceStatus) v1alpha1.Phase {
	if st.Phase == v1alpha1.PhaseTerminating {
		return v1alpha1.PhaseTerminating
	}
	return v1alpha1.PhaseProgressing
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// errGone tells the writer the object is gone (finalizer removed): nothing to write.
var errGone = errors.New("object released")

// errWritingStatus marks a failed status write: the transitions it carried were not
// recorded, so no event is emitted for them (the next reconcile sees them again).
var errWritingStatus = errors.New("writing status")
