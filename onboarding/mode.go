package onboarding

import (
	"fmt"

	"k8s.io/client-go/rest"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Mode is standard mode assembled, as workspaces.Mode is kcp mode: the builder mounts
// it on a manager (Provider) and registers its engine (Register).
type Mode[T provider.Object] struct {
	// Provider yields the onboarding cluster, the one cluster holding the Service
	// objects, under ClusterName.
	Provider *single.Provider
	// Cluster is that cluster, for a readiness check on its cache; Register adds it to
	// the manager so that its cache runs.
	Cluster ctrlcluster.Cluster

	opts ModeOptions
}

// NewMode assembles standard mode on the onboarding cluster cfg points at (a tuned
// config: its clients are the runtime's own).
func NewMode[T provider.Object](cfg *rest.Config, opts ModeOptions) (*Mode[T], error) {
	cl, err := ctrlcluster.New(cfg, func(o *ctrlcluster.Options) { o.Scheme = opts.Scheme })
	if err != nil {
		return nil, fmt.Errorf("onboarding cluster: %w", err)
	}
	return &Mode[T]{Provider: single.New(ClusterName, cl), Cluster: cl, opts: opts}, nil
}

// Register registers standard mode's engine on mgr, whose provider is m.Provider and
// whose local cluster is the platform cluster: the setup s with the tenancy of the
// tenants' ControlPlanes, which orders their MCP access through mgr's platform client.
func (m *Mode[T]) Register(mgr mcmanager.Manager, opts engine.Options[T], s engine.Setup) (*engine.Engine[T], error) {
	if err := mgr.GetLocalManager().Add(m.Cluster); err != nil {
		return nil, err
	}
	opts.Tenancy = newTenancy[T](mgr.GetLocalManager().GetClient(), m.opts)
	return engine.Register(mgr, opts, s)
}
