package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Present reports whether the tenant named by a platform-side request's labels still
// has a Service object in a cluster the engine serves. The orphan sweep
// (internal/sweep) asks it; it reads the informer caches only. A cluster that is not
// engaged (a kcp workspace that unbound or vanished) has no objects; the sweep's
// repeated-absence rule keeps a briefly disengaged workspace safe.
func (e *Engine[T]) Present(ctx context.Context, labels map[string]string) (bool, error) {
	for _, req := range e.opts.Tenancy.RequestsFor(ctx, labels, e.clusters) {
		cl, ok := e.clusters.Get(string(req.ClusterName))
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
