package workspaces

import (
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpmode"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpprovider"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpwatch"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// minterRecheck is how long kcp mode's Minters trust the objects they found in order
// in a workspace (tokens.Options.Recheck); the access watch ends that trust at once
// when one of them changes, so the recheck only bounds what a lost watch event could
// hide.
const minterRecheck = 30 * time.Minute

// ModeOptions are what kcp mode needs of the provider's declarations.
type ModeOptions[T provider.Object] struct {
	// Name is the provider's name: the managed-by label of what the runtime creates in
	// workspaces, and the prefix of its ServiceAccounts there.
	Name   string
	Scheme *runtime.Scheme
	// NewObject and NewList return an empty Service object and list; Kind is its kind.
	NewObject func() T
	NewList   func() client.ObjectList
	Kind      string
	// Rights are the provider's rights in each workspace; WorkerRights, when set, the
	// worker's apart ("<name>-worker").
	Rights       Rights
	WorkerRights *Rights
	// Tune, RetryInterval and FieldOwner are the runtime's client tuning, the wait
	// while a workspace refuses, and the field manager of its writes.
	Tune          func(*rest.Config)
	RetryInterval time.Duration
	FieldOwner    string
}

// Rights are what one credential may do in each workspace.
type Rights struct {
	// Rules are granted through a ClusterRole the runtime keeps.
	Rules []rbacv1.PolicyRule
	// ClusterRoles are ClusterRoles of the workspace the credential is bound to as
	// well (a declaration's RoleRefs, e.g. cluster-admin); a missing one keeps the
	// tenant waiting with RoleMissing.
	ClusterRoles []string
	// Namespaced are the rules and Role refs the declaration scopes to a namespace,
	// kept there through Roles and RoleBindings (which the export must claim:
	// apiexport.RoleClaims); a missing namespace keeps the tenant waiting with
	// NamespaceMissing.
	Namespaced []tokens.NamespaceRights
}

// Mode is kcp mode for one kcp connection, assembled: the builder mounts it on a manager
// (Provider) and registers its engine (Register).
type Mode[T provider.Object] struct {
	// Provider engages every workspace bound to the APIExport.
	Provider *kcpprovider.Provider

	// tenancy is what the engine asks of a workspace tenant: the singleton rule, the
	// end-user credentials minted there, their release.
	tenancy *tenancy[T]
	// objects is the one watch of the Service type across every virtual workspace;
	// access watches the runtime's ServiceAccounts and RBAC in the workspaces, repairs
	// tampering within seconds and answers the Minters' reads.
	objects *kcpwatch.SharedWatch
	access  *kcpwatch.AccessWatch
}

// NewMode assembles kcp mode for the connection c.
func NewMode[T provider.Object](c kcpmode.Connection, opts ModeOptions[T]) (*Mode[T], error) {
	objects := kcpwatch.NewSharedWatch(opts.NewObject(), opts.NewList)
	prov, err := objects.NewProvider(c.VirtualWorkspace, c.EndpointSlice, opts.Name, opts.Scheme)
	if err != nil {
		return nil, fmt.Errorf("kcp apiexport provider: %w", err)
	}
	managedBy := map[string]string{apiexport.ManagedByLabel: opts.Name}
	access := kcpwatch.NewAccessWatch(opts.Scheme, managedBy)
	newMinter := func(account string, rights Rights) *tokens.Minter {
		return tokens.New(tokens.Options{
			Direct: c.Direct, Identity: c.Identity, ProviderName: opts.Name, Account: account,
			Rules: rights.Rules, ClusterRoles: rights.ClusterRoles, Namespaced: rights.Namespaced, Labels: managedBy, Observe: metrics.TokenObserver(opts.Name),
			Recheck: minterRecheck, Cache: access,
		})
	}
	minters := []*tokens.Minter{newMinter("", opts.Rights)}
	var workerMinter *tokens.Minter
	if opts.WorkerRights != nil {
		workerMinter = newMinter("worker", *opts.WorkerRights)
		minters = append(minters, workerMinter)
	}
	access.ReportTo(minters...)
	objects.OnVirtualWorkspace(access.VirtualWorkspace)
	objects.OnVirtualWorkspaceGone(access.VirtualWorkspaceGone)
	return &Mode[T]{Provider: prov, objects: objects, access: access,
		tenancy: newTenancy[T](tenancyOptions{
			Minter: minters[0], WorkerMinter: workerMinter, NewList: opts.NewList, Kind: opts.Kind,
			Scheme: opts.Scheme, Tune: opts.Tune, RetryInterval: opts.RetryInterval, FieldOwner: opts.FieldOwner,
		}),
	}, nil
}

// Register registers kcp mode's engine on mgr, whose provider is m.Provider: the setup
// s with the workspace tenancy, kcp mode's own sources (one watch of the Service objects
// of every virtual workspace, the access watch) and one REST mapper per virtual
// workspace.
func (m *Mode[T]) Register(mgr mcmanager.Manager, opts engine.Options[T], s engine.Setup) (*engine.Engine[T], error) {
	opts.Tenancy = m.tenancy
	s.WrapCluster = kcpwatch.NewSharedDiscovery().Wrap
	s.SharedWatch = m.objects.Source
	s.Sources = append(s.Sources, m.access.Source)
	e, err := engine.Register(mgr, opts, s)
	if err != nil {
		return nil, err
	}
	// Added after the engine, so that the engine knows a workspace by the time the
	// shared watch queues its objects on engagement.
	if err := mgr.Add(m.objects); err != nil {
		return nil, err
	}
	return e, nil
}
