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

// tenancyOptions configure kcp mode's tenancy.
type tenancyOptions struct {
	// Minter mints the tenant's end-user credentials: the provider's, and the worker's
	// too unless WorkerMinter is set.
	Minter *tokens.Minter
	// WorkerMinter, when set, mints the worker's credential apart (a ServiceAccount and
	// ClusterRole of its own, with the worker's rules), so the worker holds none of the
	// provider's install-time rights.
	WorkerMinter *tokens.Minter
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
	// FieldOwner, if set, is the field manager of the Minter's writes in the
	// workspace (the virtual workspace replaces the user agent the API server would
	// take it from).
	FieldOwner string
}

// tenancy is kcp mode for the engine.
type tenancy[T provider.Object] struct {
	opts tenancyOptions

	mu      sync.Mutex
	clients map[clientKey]cachedClient
}

// clientKey names one credential of a workspace: the provider's or the worker's.
type clientKey struct {
	lc     logicalcluster.Name
	worker bool
}

type cachedClient struct {
	token  string
	access *cluster.Access
}

// newTenancy returns kcp mode's tenancy.
func newTenancy[T provider.Object](opts tenancyOptions) *tenancy[T] {
	if opts.RetryInterval == 0 {
		opts.RetryInterval = 30 * time.Second
	}
	return &tenancy[T]{opts: opts, clients: map[clientKey]cachedClient{}}
}

// Mode is kcp.
func (*tenancy[T]) Mode() cluster.Mode { return cluster.ModeKCP }

// Target: the workspace is the tenant.
func (*tenancy[T]) Target(clusterName string, cl ctrlcluster.Cluster, obj T) engine.Target[T] {
	id := cluster.KCPIdentity(clusterName)
	return engine.Target[T]{
		ClusterName: clusterName, Cluster: cl, Object: obj, Identity: id,
		Key: access.Key{Request: reconcile.Request{NamespacedName: client.ObjectKey{Name: clusterName}}, Identity: id},
	}
}

// Admit applies the singleton rule (engine.AdmitSingleton) to the workspace.
func (t *tenancy[T]) Admit(ctx context.Context, tg engine.Target[T]) error {
	return engine.AdmitSingleton(ctx, engine.Singleton{NewList: t.opts.NewList, Kind: t.opts.Kind, Scope: "workspace"}, tg)
}

// EndUser mints (or reuses) the tenant's workspace credential and returns a client
// built from it.
func (t *tenancy[T]) EndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	a, err := t.ensure(ctx, tg, t.opts.Minter, false)
	if err == nil {
		t.markProvisioned(tg.Object)
	}
	return a, err
}

// EndUserWorker mints (or reuses) the worker's own workspace credential
// (engine.WorkerTenancy); nil when the worker shares the provider's.
func (t *tenancy[T]) EndUserWorker(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	if t.opts.WorkerMinter == nil {
		return nil, nil
	}
	return t.ensure(ctx, tg, t.opts.WorkerMinter, true)
}

// RevokeWorker removes the worker's ServiceAccount and RBAC from the workspace
// (engine.WorkerTenancy): deleting the account, then its roles, refuses its tokens
// within a second, even where a rejected claim keeps a binding in place.
// ReleaseEndUser removes them again and reports what is left.
func (t *tenancy[T]) RevokeWorker(ctx context.Context, tg engine.Target[T]) error {
	if t.opts.WorkerMinter == nil {
		return nil
	}
	lc := logicalcluster.Name(tg.ClusterName)
	t.mu.Lock()
	delete(t.clients, clientKey{lc: lc, worker: true})
	t.mu.Unlock()
	if _, err := t.opts.WorkerMinter.Remove(ctx, t.directClient(tg), lc); err != nil {
		return fmt.Errorf("removing the worker's workspace credential: %w", err)
	}
	return nil
}

// ensure has m mint (or reuse) one credential of the workspace.
func (t *tenancy[T]) ensure(ctx context.Context, tg engine.Target[T], m *tokens.Minter, worker bool) (*cluster.Access, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	cred, err := m.Ensure(ctx, t.directClient(tg), lc)
	if err != nil {
		var claim *tokens.ClaimNotAcceptedError
		var foreign *tokens.NotManagedError
		var missing *tokens.MissingError
		switch {
		case errors.As(err, &missing):
			// The tenant may create it; nothing watches for that but the retry.
			log.FromContext(ctx).Info("what the provider's permissions refer to is missing in the workspace",
				"kind", missing.Kind, "namespace", missing.Namespace, "name", missing.Name)
			reason := v1alpha1.ReasonRoleMissing
			if missing.Kind == "Namespace" {
				reason = v1alpha1.ReasonNamespaceMissing
			}
			return nil, &access.WaitingError{Reason: reason, Final: true,
				RequeueAfter: t.opts.RetryInterval, Message: missing.Error()}
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
	return t.accessFor(clientKey{lc: lc, worker: worker}, cred)
}

// repairedRequeue is how soon the reconcile after a repair hands the worker its access.
const repairedRequeue = 100 * time.Millisecond

// accessFor returns the client of a credential, reusing the one built for the same
// token.
func (t *tenancy[T]) accessFor(key clientKey, cred *tokens.Credential) (*cluster.Access, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[key]; ok && c.token == cred.Token {
		return c.access, nil
	}
	// Every credential here is the Minter's, which mints each with its REST config.
	cfg := cred.RESTConfig()
	if cfg == nil {
		return nil, fmt.Errorf("workspace credential of %s has no REST config", key.lc)
	}
	a, err := access.FromConfig(cfg, cred.Kubeconfig, t.opts.Scheme, t.opts.Tune)
	if err != nil {
		return nil, fmt.Errorf("workspace credential: %w", err)
	}
	// The Minter renews the token at this point on the next Ensure; the engine comes
	// back by then so the worker's kubeconfig is replaced in time.
	a.RenewAt = cred.RenewAt
	t.clients[key] = cachedClient{token: cred.Token, access: a}
	return a, nil
}

// markProvisioned records on the object (written with its status) that the runtime
// keeps objects in the workspace: after a restart, it is how deletion tells a
// workspace whose claims were rejected after provisioning (cleanup must wait) from
// one that never accepted them (nothing to clean up).
func (t *tenancy[T]) markProvisioned(obj T) {
	msg := fmt.Sprintf("the runtime keeps ServiceAccount %s and its RBAC in this workspace for the worker; deleting this %s removes them",
		t.opts.Minter.ServiceAccount(), t.opts.Kind)
	if t.opts.WorkerMinter != nil {
		msg = fmt.Sprintf("the runtime keeps ServiceAccounts %s (the provider's) and %s (the worker's) and their RBAC in this workspace; deleting this %s removes them",
			t.opts.Minter.ServiceAccount(), t.opts.WorkerMinter.ServiceAccount(), t.opts.Kind)
	}
	meta.SetStatusCondition(&obj.GetServiceStatus().Conditions, metav1.Condition{
		Type: v1alpha1.ConditionWorkspaceAccess, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProvisioned,
		ObservedGeneration: obj.GetGeneration(), Message: msg,
	})
}

// LookupEndUser returns the credential for the deletion path without creating or
// repairing anything (tokens.Minter.Lookup); nil when there is none.
func (t *tenancy[T]) LookupEndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	cred := t.opts.Minter.Lookup(ctx, lc)
	if cred == nil {
		return nil, nil
	}
	return t.accessFor(clientKey{lc: lc}, cred)
}

// ReleaseEndUser removes the workspace ServiceAccount and its RBAC. It is done once the
// ServiceAccount is gone (its tokens with it) and nothing the runtime still manages is
// left; what a rejected claim keeps it from removing holds the deletion, with a
// message saying how to let it finish. Objects the tenant took over (the managed-by
// label removed) are left to the tenant and reported.
func (t *tenancy[T]) ReleaseEndUser(ctx context.Context, tg engine.Target[T]) (bool, error) {
	lc := logicalcluster.Name(tg.ClusterName)
	ws := t.directClient(tg)
	r, err := t.opts.Minter.Remove(ctx, ws, lc)
	if t.opts.WorkerMinter != nil && err == nil {
		var worker tokens.Removal
		if worker, err = t.opts.WorkerMinter.Remove(ctx, ws, lc); err == nil {
			r = worker.Join(r)
		}
	}
	if err != nil {
		return false, fmt.Errorf("removing workspace credential: %w", err)
	}
	t.mu.Lock()
	delete(t.clients, clientKey{lc: lc})
	delete(t.clients, clientKey{lc: lc, worker: true})
	t.mu.Unlock()
	if !r.Done() && (provisioned(tg.Object) || !onlyClaimsRefused(r)) {
		log.FromContext(ctx).Info("deletion waits: the workspace credential cannot be removed completely", "left", r.Explain())
		return false, &access.WaitingError{Reason: v1alpha1.ReasonCleanupBlocked, Final: true,
			RequeueAfter: t.opts.RetryInterval, Message: r.Explain()}
	}
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
// (engine.DirectClient) for the token minter, built on its first use: the cluster's
// own client reads from the shared wildcard cache, which would start informers on
// every workspace's ServiceAccounts and RBAC (and the claims grant no list/watch).
// It is not kept: the minter writes through it when it first serves a workspace and
// when something there must be repaired, and answers every other Ensure from its own
// cache and the watch of its objects, so a client kept per workspace (9 KB each, its
// codec factory and REST clients; heap profiles at 500 workspaces, docs/design/scale.md)
// would sit unused; a takeover by another replica builds none when the workspace's
// objects are in order.
func (t *tenancy[T]) directClient(tg engine.Target[T]) client.Client {
	return access.Lazy(t.opts.Scheme, func() (client.Client, error) {
		c, err := engine.DirectClient(tg.Cluster, t.opts.Scheme)
		if err != nil {
			return nil, fmt.Errorf("virtual workspace client for %s: %w", tg.ClusterName, err)
		}
		if t.opts.FieldOwner != "" {
			c = client.WithFieldOwner(c, t.opts.FieldOwner)
		}
		return c, nil
	})
}

// RequestsFor maps a request's logical cluster label to the workspace's objects.
func (*tenancy[T]) RequestsFor(ctx context.Context, labels map[string]string, clusters engine.ClusterLister) []mcreconcile.Request {
	lc := labels[LogicalClusterLabel]
	if lc == "" {
		return nil
	}
	return clusters.List(ctx, lc)
}
