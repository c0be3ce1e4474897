package engine

import (
	"context"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Setup configures the controller.
type Setup struct {
	// Name of the controller, unique per manager.
	Name string
	// NewList returns an empty list of the Service type.
	NewList func() client.ObjectList
	// ProviderConfig is an empty ProviderConfig, the type to watch on the platform cluster.
	ProviderConfig client.Object
	// ManagedBy is the managed-by label value of the runtime's platform-side requests.
	ManagedBy string
	// Singleton re-queues every object of a workspace when one of them changes, so that
	// the next oldest takes over when the active one goes.
	Singleton bool
	// MaxConcurrentReconciles bounds parallel reconciles.
	MaxConcurrentReconciles int
	// Restartable allows registering the controller again in a new manager of the same
	// process (kcp mode restarts when spec.kcp changes); controller-runtime otherwise
	// refuses a second controller of the same name.
	Restartable bool
	// SharedWatch, if set, is the one source of Service object events for all engaged
	// clusters, given the event handler of each cluster's objects; without it the
	// controller watches the Service type in each engaged cluster
	// (kcpwatch.SharedWatch says why kcp mode wants one watch).
	SharedWatch func(func(multicluster.ClusterName) handler.TypedEventHandler[client.Object, mcreconcile.Request]) source.TypedSource[mcreconcile.Request]
	// Sources are further sources of reconcile requests, given the engaged clusters'
	// objects (e.g. kcpwatch.AccessWatch, which brings a workspace's objects back
	// when the worker's access there was tampered with).
	Sources []func(ClusterLister) source.TypedSource[mcreconcile.Request]
	// WrapCluster, if set, replaces each engaged cluster before the engine sees it,
	// e.g. to share one REST mapper among workspaces (kcpwatch.SharedDiscovery).
	WrapCluster func(ctrlcluster.Cluster) (ctrlcluster.Cluster, error)
}

// Register builds the engine's controller on mgr. The manager's local cluster is the
// platform cluster; its provider yields the clusters holding Service objects.
func Register[T provider.Object](mgr mcmanager.Manager, opts Options[T], s Setup) (*Engine[T], error) {
	set := newClusterSet(s.NewList, ownedBy(opts.FieldOwner, s.WrapCluster))
	if err := mgr.Add(set); err != nil {
		return nil, err
	}
	e := New(opts, set)
	e.known = knownClusters{served: set, get: mgr.GetCluster}
	if err := mgr.GetLocalManager().Add(e.recorder); err != nil {
		return nil, err
	}
	// The state gauges come from the leader only: the runnable needs leader election.
	if err := mgr.GetLocalManager().Add(manager.RunnableFunc(e.publish)); err != nil {
		return nil, err
	}

	local := []mcbuilder.WatchesOption{mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)}
	fanOut := mapAll(func(ctx context.Context, _ client.Object) []mcreconcile.Request { return set.List(ctx, "") })
	toTenant := mapAll(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return opts.Tenancy.RequestsFor(ctx, o.GetLabels(), set)
	})
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[openmcpconst.ManagedByLabel] == s.ManagedBy
	})

	objects := serviceObjects(set, s.Singleton)
	b := mcbuilder.ControllerManagedBy(mgr).
		Named(s.Name).
		// A ProviderConfig change re-reconciles every object in every workspace.
		Watches(s.ProviderConfig, fanOut, append(local, mcbuilder.WithPredicates(predicate.GenerationChangedPredicate{}))...).
		// Grants, denials and renewals of the tenant's requests bring it back at once.
		Watches(&clustersv1alpha1.AccessRequest{}, toTenant, append(local, mcbuilder.WithPredicates(ours))...).
		Watches(&clustersv1alpha1.ClusterRequest{}, toTenant, append(local, mcbuilder.WithPredicates(ours))...).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{MaxConcurrentReconciles: s.MaxConcurrentReconciles, SkipNameValidation: ptr.To(s.Restartable),
			LogConstructor: e.logConstructor(mgr.GetLogger().WithValues("controller", s.Name))})
	// One watch of the Service type per cluster (not the usual For plus a second watch
	// for the singleton rule: in kcp's multicluster-provider every watch is an informer
	// listener per engaged workspace), or a single shared one.
	if s.SharedWatch != nil {
		b = b.WatchesRawSource(s.SharedWatch(func(name multicluster.ClusterName) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
			return objects(name, nil)
		}))
	} else {
		b = b.Watches(opts.NewObject(), objects)
	}
	// What the provider wrote for a tenant on the platform (a HelmRelease whose status
	// Flux changed) brings the tenant back, as its requests do.
	if opts.TenantLabels != nil {
		written := predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[openmcpconst.ManagedByLabel] == opts.Provider
		})
		for _, obj := range opts.PlatformWatches {
			b = b.Watches(obj, toTenant, append(local, mcbuilder.WithPredicates(written, readinessChanged{}))...)
		}
	}
	for _, src := range s.Sources {
		b = b.WatchesRawSource(src(set))
	}
	for _, ref := range opts.References {
		b = b.WatchesRawSource(e.referenceSource(mgr, ref))
	}
	if err := b.Complete(e); err != nil {
		return nil, err
	}
	return e, nil
}

// serviceObjects is the event handler of the Service type in one cluster. It queues
// the object itself on creation, deletion and changes of its generation, labels or
// annotations (status writes do not bring it back). With singleton, the arrival or
// departure of an object also queues every object of its cluster, because that is
// what changes which one is the oldest and served.
func serviceObjects(set *clusterSet, singleton bool) mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	changed := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
	return func(name multicluster.ClusterName, _ ctrlcluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		self := func(q workqueue.TypedRateLimitingInterface[mcreconcile.Request], o client.Object) {
			q.Add(mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}})
		}
		all := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
			if singleton {
				for _, r := range set.List(ctx, string(name)) {
					q.Add(r)
				}
			}
		}
		return handler.TypedFuncs[client.Object, mcreconcile.Request]{
			CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				self(q, e.Object)
				all(ctx, q)
			},
			UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				if changed.Update(e) || e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil {
					self(q, e.ObjectNew)
				}
				if e.ObjectNew.GetDeletionTimestamp() != nil {
					all(ctx, q)
				}
			},
			DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				self(q, e.Object)
				all(ctx, q)
			},
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				self(q, e.Object)
			},
		}
	}
}

func mapAll(fn func(context.Context, client.Object) []mcreconcile.Request) mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	h := handler.TypedEnqueueRequestsFromMapFunc(fn)
	return func(multicluster.ClusterName, ctrlcluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return h
	}
}
