package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Present reports whether the tenant named by a platform-side request's labels still
// has a Service object in a cluster the manager's provider knows (served here or by
// another replica). The orphan sweep (internal/sweep) asks it; it reads the informer
// caches only. A cluster the provider does not know (a kcp workspace that unbound or
// vanished) has no objects; the sweep's repeated-absence rule keeps a briefly
// disengaged workspace safe.
func (e *Engine[T]) Present(ctx context.Context, labels map[string]string) (bool, error) {
	known := e.known
	if known == nil {
		known = e.clusters
	}
	for _, req := range e.opts.Tenancy.RequestsFor(ctx, labels, known) {
		cl, ok := known.Get(string(req.ClusterName))
		if !ok {
			continue
		}
		err := cl.GetCache().Get(ctx, req.NamespacedName, e.opts.NewObject())
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("reading %s in %s: %w", req.NamespacedName, req.ClusterName, err)
		}
	}
	return false, nil
}
