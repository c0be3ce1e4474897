package workspaces

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
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

// Admit applies the singleton rule (engine.AdmitSingleton) to the workspace.
func (t *Tenancy[T]) Admit(ctx context.Context, tg engine.Target[T]) error {
	return engine.AdmitSingleton(ctx, engine.Singleton{NewList: t.opts.NewList, Kind: t.opts.Kind, Scope: "workspace"}, tg)
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
		var foreign *tokens.NotManagedError
		switch {
		case errors.As(err, &claim):
			return nil, &access.WaitingError{Reason: v1alpha1.ReasonPermissionClaimMissing, Final: true,
				RequeueAfter: t.opts.RetryInterval, Message: claim.Error()}
		case errors.As(err, &foreign):
			// The object is hidden from the runtime's watch too: only the retry brings
			// this back after the tenant deletes it.
			return nil, &access.WaitingError{Reason: v1alpha1.ReasonConflictingObject, Final: true,
				RequeueAfter: t.opts.RetryInterval, Message: foreign.Error()}
		}
		return nil, fmt.Errorf("workspace credential: %w", err)
	}
	t.markProvisioned(tg.Object)
	if len(cred.Repaired) > 0 {
		// Said on the object before the provider hands the worker its access again
		// (the next reconcile, at once): while it was broken, the service was not
		// working, and the tenant should see why.
		logger := log.FromContext(ctx)
		logger.Info("repaired the worker's access in the workspace", "repaired", cred.Repaired)
		return nil, &access.WaitingError{Reason: v1alpha1.ReasonAccessRepaired, RequeueAfter: repairedRequeue,
			Message: "someone changed what the runtime keeps in this workspace for the worker (" + strings.Join(cred.Repaired, ", ") +
				"); the runtime restored it and is handing the worker its access again"}
	}
	return t.accessFor(lc, cred)
}

// repairedRequeue is how soon the reconcile after a repair hands the worker its access.
const repairedRequeue = 100 * time.Millisecond

// accessFor returns the client of a credential, reusing the one built for the same
// token.
func (t *Tenancy[T]) accessFor(lc logicalcluster.Name, cred *tokens.Credential) (*cluster.Access, error) {
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

// markProvisioned records on the object (written with its status) that the runtime
// keeps objects in the workspace: after a restart, it is how deletion tells a
// workspace whose claims were rejected after provisioning (cleanup must wait) from
// one that never accepted them (nothing to clean up).
func (t *Tenancy[T]) markProvisioned(obj T) {
	sa := t.opts.Minter.ServiceAccount()
	meta.SetStatusCondition(&obj.GetServiceStatus().Conditions, metav1.Condition{
		Type: v1alpha1.ConditionWorkspaceAccess, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProvisioned,
		ObservedGeneration: obj.GetGeneration(),
		Message: fmt.Sprintf("the runtime keeps ServiceAccount %s and its RBAC in this workspace for the worker; deleting this %s removes them",
			sa, t.opts.Kind),
	})
}

// LookupEndUser returns the credential for the deletion path without creating or
// repairing anything (tokens.Minter.Lookup); nil when there is none.
func (t *Tenancy[T]) LookupEndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	cred := t.opts.Minter.Lookup(ctx, lc)
	if cred == nil {
		return nil, nil
	}
	return t.accessFor(lc, cred)
}

// ReleaseEndUser removes the workspace ServiceAccount and its RBAC. It is done once the
// ServiceAccount is gone (its tokens with it) and nothing the runtime still manages is
// left; what a rejected claim keeps it from removing holds the deletion, with a
// message saying how to let it finish. Objects the tenant took over (the managed-by
// label removed) are left to the tenant and reported.
func (t *Tenancy[T]) ReleaseEndUser(ctx context.Context, tg engine.Target[T]) (bool, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	ws, err := t.directClient(tg)
	if err != nil {
		return false, err
	}
	r, err := t.opts.Minter.Remove(ctx, ws, lc)
	if err != nil {
		return false, fmt.Errorf("removing workspace credential: %w", err)
	}
	t.mu.Lock()
	delete(t.clients, lc)
	t.mu.Unlock()
	if !r.Done() && (provisioned(tg.Object) || !onlyClaimsRefused(r)) {
		log.FromContext(ctx).Info("deletion waits: the workspace credential cannot be removed completely", "left", r.Explain())
		return false, &access.WaitingError{Reason: v1alpha1.ReasonCleanupBlocked, Final: true,
			RequeueAfter: t.opts.RetryInterval, Message: r.Explain()}
	}
	t.mu.Lock()
	delete(t.direct, lc)
	t.mu.Unlock()
	if len(r.TakenOver()) > 0 {
		return true, &access.LeftBehind{Message: r.Explain()}
	}
	return true, nil
}

// provisioned says whether the object records that the runtime provisioned its
// workspace (markProvisioned).
func provisioned(obj provider.Object) bool {
	return meta.IsStatusConditionTrue(obj.GetServiceStatus().Conditions, v1alpha1.ConditionWorkspaceAccess)
}

// onlyClaimsRefused says that every object Remove could not delete was refused for
// a claim: the runtime cannot tell whether it exists at all.
func onlyClaimsRefused(r tokens.Removal) bool {
	for _, l := range r.Left {
		if l.NotManaged || !errors.Is(l.Err, tokens.ErrClaimNotAccepted) {
			return false
		}
	}
	return true
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
