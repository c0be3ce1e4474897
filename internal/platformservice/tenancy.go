package platformservice

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// ClusterName is the platform cluster's name in the multicluster manager.
const ClusterName = "platform"

// Provider wraps the platform cluster as a multicluster provider with one cluster, the
// one holding the Service objects. The caller adds the returned cluster to the manager
// so that its cache runs.
func Provider(cfg *rest.Config, scheme *runtime.Scheme) (*single.Provider, ctrlcluster.Cluster, error) {
	cl, err := ctrlcluster.New(cfg, func(o *ctrlcluster.Options) { o.Scheme = scheme })
	if err != nil {
		return nil, nil, fmt.Errorf("platform cluster for Service objects: %w", err)
	}
	return single.New(ClusterName, cl), cl, nil
}

// Options configure platform-service mode's tenancy.
type Options struct {
	// Kind names the Service type in messages.
	Kind string
	// NewList returns an empty list of the Service type (for the singleton rule).
	NewList func() client.ObjectList
	// EndUser grants the end-user access: a ServiceAccount of the platform cluster with
	// the provider's declared MCP permissions.
	EndUser *Grant
}

// Tenancy is platform-service mode for the engine.
type Tenancy[T provider.Object] struct {
	opts Options
}

var _ engine.Tenancy[provider.Object] = &Tenancy[provider.Object]{}

// NewTenancy returns platform-service mode's tenancy.
func NewTenancy[T provider.Object](opts Options) *Tenancy[T] {
	return &Tenancy[T]{opts: opts}
}

// Mode is platform.
func (*Tenancy[T]) Mode() cluster.Mode { return cluster.ModePlatform }

// Target: the served object is the tenant.
func (*Tenancy[T]) Target(clusterName string, cl ctrlcluster.Cluster, obj T) engine.Target[T] {
	return engine.ObjectTarget(clusterName, cl, obj, cluster.PlatformIdentity(obj.GetNamespace(), obj.GetName()))
}

// Admit applies the singleton rule (engine.AdmitSingleton) to the whole platform
// cluster, in the order kcp mode applies it to a workspace.
func (t *Tenancy[T]) Admit(ctx context.Context, tg engine.Target[T]) error {
	return engine.AdmitSingleton(ctx, engine.Singleton{NewList: t.opts.NewList, Kind: t.opts.Kind, Scope: "platform cluster"}, tg)
}

// EndUser returns the scoped access to the platform cluster.
func (t *Tenancy[T]) EndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	return t.opts.EndUser.Ensure(ctx, tg.Key)
}

// LookupEndUser returns the existing access for the deletion path, nil when it was
// never granted.
func (t *Tenancy[T]) LookupEndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	return t.opts.EndUser.Lookup(ctx, tg.Key)
}

// ReleaseEndUser removes the ServiceAccount and its RBAC.
func (t *Tenancy[T]) ReleaseEndUser(ctx context.Context, tg engine.Target[T]) (bool, error) {
	return t.opts.EndUser.Release(ctx, tg.Key)
}

// RequestsFor maps nothing: this mode creates no ClusterRequests or AccessRequests.
func (*Tenancy[T]) RequestsFor(context.Context, map[string]string, engine.ClusterLister) []mcreconcile.Request {
	return nil
}
