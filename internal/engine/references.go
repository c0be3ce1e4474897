package engine

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Reference is a kind of object on the platform cluster (a Secret, a ConfigMap) that
// the ProviderConfig or Service objects name, such as credentials of a backup bucket.
type Reference[T provider.Object] struct {
	// Kind is an empty object of the kind.
	Kind client.Object
	// Namespace is where those objects are; only it is watched.
	Namespace string
	// Uses names the objects of Kind in Namespace that obj uses, through pc or its own
	// spec; pc is nil while the ProviderConfig cannot be loaded.
	Uses func(pc provider.ProviderConfig, obj T) []string
}

// referenceSource watches ref's kind in its namespace on the platform cluster and
// queues exactly the Service objects that use the one that changed. The watch is an
// informer of the platform manager's cache, which the builder restricts to the
// namespace for that kind.
func (e *Engine[T]) referenceSource(mgr mcmanager.Manager, ref Reference[T]) source.TypedSource[mcreconcile.Request] {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ref.Namespace })
	users := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []mcreconcile.Request {
		return e.usersOf(ctx, ref, o.GetName())
	})
	return source.TypedKind[client.Object, mcreconcile.Request](mgr.GetLocalManager().GetCache(), ref.Kind, users, inNamespace)
}

// usersOf lists the Service objects, in every engaged cluster, that use name.
func (e *Engine[T]) usersOf(ctx context.Context, ref Reference[T], name string) []mcreconcile.Request {
	pc, err := e.opts.ProviderConfig.Load(ctx)
	if err != nil {
		pc = nil
	}
	var out []mcreconcile.Request
	e.clusters.each(ctx, func(cluster string, o client.Object) {
		obj, ok := o.(T)
		if !ok || !slices.Contains(ref.Uses(pc, obj), name) {
			return
		}
		out = append(out, mcreconcile.Request{ClusterName: multicluster.ClusterName(cluster),
			Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}})
	})
	return out
}
