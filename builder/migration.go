package builder

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/handover"
)

// OperatorDeploymentPrefix is how the openmcp-operator names a ServiceProvider's run
// Deployment: sp-<provider name>.
const OperatorDeploymentPrefix = "sp-"

// takeOver applies the rest of a migration declaration to standard mode's engine (its
// request names are engineOptions', requestNames): the old binary's finalizer and
// Ready reasons, a hold while its pods may still run, and the removal of its
// onboarding requests once they cannot.
func (r *Runtime[T]) takeOver(mgr mcmanager.Manager, eopts *engine.Options[T], opts Options) error {
	m := opts.Migration
	if m.Finalizer != "" {
		eopts.Finalizer = m.Finalizer
	}
	if m.Reasons != nil {
		eopts.WrittenReason = m.Reason
	}
	direct, err := client.New(mgr.GetLocalManager().GetConfig(), client.Options{Scheme: r.decl.scheme})
	if err != nil {
		return fmt.Errorf("migration: platform client: %w", err)
	}
	hopts := handover.Options{
		Client: direct, Namespace: opts.Namespace, Deployment: OperatorDeploymentPrefix + r.decl.name,
		Requests: m.OnboardingRequests,
	}
	gate := handover.NewGate(hopts)
	eopts.Hold, eopts.HoldRetry = gate.Held, gate.Retry()
	if c := handover.New(gate); c != nil {
		if err := mgr.GetLocalManager().Add(c); err != nil {
			return fmt.Errorf("migration: %w", err)
		}
	}
	return nil
}
