package platformservice

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// ModeOptions configure platform-service mode for one provider.
type ModeOptions struct {
	// ProviderName names the grants' ServiceAccounts and RBAC.
	ProviderName string
	// Kind names the Service type in messages.
	Kind string
	// NewList returns an empty list of the Service type.
	NewList func() client.ObjectList
	// Scheme knows the Service API type; the clients handed out use it.
	Scheme *runtime.Scheme
	// EndUser are the permissions the provider declares for the end-user cluster
	// (builder MCPPermissions).
	EndUser cluster.Permissions
	// Workload are the permissions the provider's workers need; nil when the provider
	// declares no workload cluster.
	Workload *cluster.Permissions
	// Tune adjusts the REST config of the clients handed out.
	Tune func(*rest.Config)
}

// Mode is platform-service mode assembled, as workspaces.Mode is kcp mode: the cluster
// holding the Service objects, as a multicluster provider, and how tenants get their
// access, which Register hands the engine.
type Mode[T provider.Object] struct {
	// Provider yields the one cluster holding the Service objects.
	Provider *single.Provider
	// Cluster is that cluster, for a readiness check on its cache; Register adds it
	// to the manager so that its cache runs.
	Cluster ctrlcluster.Cluster
	// Tenancy is the mode's engine.Tenancy.
	Tenancy *Tenancy[T]
	// Workload grants the workers' access to the platform cluster; nil without
	// ModeOptions.Workload. No workload cluster is ordered.
	Workload *Grant
}

// NewMode returns platform-service mode on the platform cluster cfg points at (a tuned
// config: its clients are the runtime's own).
func NewMode[T provider.Object](cfg *rest.Config, opts ModeOptions) (*Mode[T], error) {
	prov, serviceCluster, err := Provider(cfg, opts.Scheme)
	if err != nil {
		return nil, err
	}
	// The grants read and write ServiceAccounts and RBAC directly: a cache would watch
	// every ServiceAccount and role of the platform cluster.
	direct, err := client.New(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("platform client: %w", err)
	}
	grant := func(purpose, waiting string, perms cluster.Permissions) (*Grant, error) {
		return NewGrant(direct, cfg, GrantOptions{
			ProviderName: opts.ProviderName, Purpose: purpose, Permissions: perms,
			WaitingReason: waiting, Scheme: opts.Scheme, Tune: opts.Tune,
		})
	}
	endUser, err := grant(PurposeEndUser, v1alpha1.ReasonWaitingForAccess, opts.EndUser)
	if err != nil {
		return nil, err
	}
	m := &Mode[T]{
		Provider: prov, Cluster: serviceCluster,
		Tenancy: NewTenancy[T](Options{Kind: opts.Kind, NewList: opts.NewList, EndUser: endUser}),
	}
	if opts.Workload != nil {
		// The worker lands on the platform cluster, next to what it serves.
		if m.Workload, err = grant(PurposeWorkload, v1alpha1.ReasonWaitingForWorkload, *opts.Workload); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Register registers platform-service mode's engine on mgr, whose provider is
// m.Provider: the setup s with the mode's tenancy and, when declared, the workers'
// grant on the platform cluster in place of a workload cluster.
func (m *Mode[T]) Register(mgr mcmanager.Manager, opts engine.Options[T], s engine.Setup) (*engine.Engine[T], error) {
	if err := mgr.GetLocalManager().Add(m.Cluster); err != nil {
		return nil, err
	}
	opts.Tenancy = m.Tenancy
	if m.Workload != nil {
		opts.Workload = m.Workload
	}
	return engine.Register(mgr, opts, s)
}
