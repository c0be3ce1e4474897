package workspaces

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// LogicalClusterLabel marks platform-side requests with the tenant's logical cluster.
const LogicalClusterLabel = "kcp.services.open-control-plane.io/logical-cluster"

// Labels identify a workspace tenant on its platform-side requests.
func Labels(req reconcile.Request) map[string]string {
	return map[string]string{LogicalClusterLabel: req.Name}
}

// Options configure kcp mode's tenancy.
type Options struct {
	// Minter mints the tenant's end-user credentials.
	Minter *tokens.Minter
	// NewList returns an empty list of the Service type (for the singleton rule).
	NewList func() client.ObjectList
	// Kind names the Service type in messages.
	Kind string
	// Scheme of the end-user client.
	Scheme *runtime.Scheme
	// Tune adjusts the end-user client's REST config.
	Tune func(*rest.Config)
	// RetryInterval after a missing permission claim.
	RetryInterval time.Duration
}

// Tenancy is kcp mode for the engine.
type Tenancy[T provider.Object] struct {
	opts Options

	mu      sync.Mutex
	clients map[logicalcluster.Name]cachedClient
	// direct are uncached virtual-workspace clients per workspace, for the token
	// minter: the cluster's own client reads from the shared wildcard cache, which would
	// start informers on every workspace's ServiceAccounts and RBAC (and the claims
	// grant no list/watch).
	direct map[logicalcluster.Name]client.Client
}

type cachedClient struct {
	token  string
	access *cluster.Access
}

// NewTenancy returns kcp mode's tenancy.
func NewTenancy[T provider.Object](opts Options) *Tenancy[T] {
	if opts.RetryInterval == 0 {
		opts.RetryInterval = 30 * time.Second
	}
	return &Tenancy[T]{opts: opts, clients: map[logicalcluster.Name]cachedClient{}, direct: map[logicalcluster.Name]client.Client{}}
}

// Mode is kcp.
func (*Tenancy[T]) Mode() cluster.Mode { return cluster.ModeKCP }

// Target: the workspace is the tenant.
func (*Tenancy[T]) Target(clusterName string, cl ctrlcluster.Cluster, obj T) engine.Target[T] {
	id := cluster.KCPIdentity(clusterName)
	return engine.Target[T]{
		ClusterName: clusterName, Cluster: cl, Object: obj, Identity: id,
		Key: access.Key{Request: reconcile.Request{NamespacedName: client.ObjectKey{Name: clusterName}}, Identity: id},
	}
}

// Admit applies the singleton rule: the oldest object of the workspace (by creation
// time, then namespace/name) is served, including while it is being deleted, so that
// its successor starts only after its cleanup finished.
func (t *Tenancy[T]) Admit(ctx context.Context, tg engine.Target[T]) error {
	list := t.opts.NewList()
	if err := tg.Cluster.GetCache().List(ctx, list); err != nil {
		return fmt.Errorf("listing %s objects of the workspace: %w", t.opts.Kind, err)
	}
	var objs []client.Object
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			objs = append(objs, co)
		}
		return nil
	})
	active := Oldest(objs)
	if active == nil || active.GetUID() == tg.Object.GetUID() {
		return nil
	}
	return &access.WaitingError{
		Reason:  v1alpha1.ReasonNotSingleton,
		Message: fmt.Sprintf("only one %s per workspace is served: %s is active; delete it to promote this one", t.opts.Kind, client.ObjectKeyFromObject(active)),
	}
}

// Oldest returns the object the singleton rule serves.
func Oldest(objs []client.Object) client.Object {
	if len(objs) == 0 {
		return nil
	}
	sorted := append([]client.Object(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool {
		ti, tj := sorted[i].GetCreationTimestamp(), sorted[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return client.ObjectKeyFromObject(sorted[i]).String() < client.ObjectKeyFromObject(sorted[j]).String()
	})
	return sorted[0]
}

// EndUser mints (or reuses) the tenant's workspace credential and returns a client
// built from it.
func (t *Tenancy[T]) EndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	ws, err := t.directClient(tg)
	if err != nil {
		return nil, err
	}
	cred, err := t.opts.Minter.Ensure(ctx, ws, lc)
	if err != nil {
		var claim *tokens.ClaimNotAcceptedError
		if errors.As(err, &claim) {
			return nil, &access.WaitingError{Reason: v1alpha1.ReasonPermissionClaimMissing, Final: true,
				RequeueAfter: t.opts.RetryInterval, Message: claim.Error()}
		}
		return nil, fmt.Errorf("workspace credential: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[lc]; ok && c.token == cred.Token {
		return c.access, nil
	}
	a, err := access.FromKubeconfig(cred.Kubeconfig, t.opts.Scheme, t.opts.Tune)
	if err != nil {
		return nil, fmt.Errorf("workspace credential: %w", err)
	}
	// The Minter renews the token at this point on the next Ensure; the engine comes
	// back by then so the worker's kubeconfig is replaced in time.
	a.RenewAt = cred.RenewAt
	t.clients[lc] = cachedClient{token: cred.Token, access: a}
	return a, nil
}

// LookupEndUser returns the credential for the deletion path. A workspace whose claims
// were never accepted has nothing of ours in it: no credential, and nothing to wait for.
func (t *Tenancy[T]) LookupEndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	a, err := t.EndUser(ctx, tg)
	if w, ok := access.AsWaiting(err); ok && w.Reason == v1alpha1.ReasonPermissionClaimMissing {
		return nil, nil
	}
	return a, err
}

// ReleaseEndUser removes the workspace ServiceAccount and its RBAC.
func (t *Tenancy[T]) ReleaseEndUser(ctx context.Context, tg engine.Target[T]) (bool, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	ws, err := t.directClient(tg)
	if err != nil {
		return false, err
	}
	if err := t.opts.Minter.Remove(ctx, ws, lc); err != nil && !errors.Is(err, tokens.ErrClaimNotAccepted) {
		return false, fmt.Errorf("removing workspace credential: %w", err)
	}
	t.mu.Lock()
	delete(t.clients, lc)
	delete(t.direct, lc)
	t.mu.Unlock()
	return true, nil
}

// directClient returns the workspace's uncached virtual-workspace client
// (engine.DirectClient), kept per workspace.
func (t *Tenancy[T]) directClient(tg engine.Target[T]) (client.Client, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.direct[lc]; ok {
		return c, nil
	}
	c, err := engine.DirectClient(tg.Cluster, t.opts.Scheme)
	if err != nil {
		return nil, fmt.Errorf("virtual workspace client for %s: %w", lc, err)
	}
	t.direct[lc] = c
	return c, nil
}

// RequestsFor maps a request's logical cluster label to the workspace's objects.
func (*Tenancy[T]) RequestsFor(ctx context.Context, labels map[string]string, clusters engine.ClusterLister) []mcreconcile.Request {
	lc := labels[LogicalClusterLabel]
	if lc == "" {
		return nil
	}
	return clusters.List(ctx, lc)
}
