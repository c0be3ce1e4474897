package builder

import (
	"fmt"

	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/sweep"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/workspaces"
)

// Tenant labels per mode: what names the tenant on a platform-side request.
var (
	standardTenantLabels = []string{openmcpconst.OnboardingNamespaceLabel, openmcpconst.OnboardingNameLabel}
	kcpTenantLabels      = []string{workspaces.LogicalClusterLabel}
)

// addSweep runs the orphan sweep (internal/sweep) of one mode on mgr's local manager,
// so it sweeps only while this replica leads the mode. For a gone tenant it calls the
// provider's Delete with the engine's record of the tenant's last object, then revokes
// the tenant's requests. responsible, if set, picks this replica's share of the
// tenants. SweepInterval < 0 turns it off.
func addSweep[T provider.Object](mgr mcmanager.Manager, e *engine.Engine[T], name string, tenantLabels []string, responsible func(map[string]string) bool, opts Options) error {
	if opts.SweepInterval < 0 {
		return nil
	}
	s := sweep.New(sweep.Options{
		Client: mgr.GetLocalManager().GetClient(), ManagedBy: name, TenantLabels: tenantLabels,
		Present: e.Present, Responsible: responsible, Delete: e.DeleteOrphan, Interval: opts.SweepInterval, Absences: opts.SweepAbsences,
	})
	if err := mgr.GetLocalManager().Add(s); err != nil {
		return fmt.Errorf("adding the orphan sweep: %w", err)
	}
	return nil
}
