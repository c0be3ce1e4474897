package tokens

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GlobalServiceAccounts reports what the Minter knows about kcp's GlobalServiceAccount
// gate: known is false until an Ensure has found out (or Options set it).
func (m *Minter) GlobalServiceAccounts() (enabled, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.global == nil {
		return false, false
	}
	return *m.global, true
}

// ensureDetectingGate finds out whether kcp has the GlobalServiceAccount gate: it binds
// the runtime's ServiceAccount as the precise User subject and requests a token; if kcp
// still refuses once the binding has had PropagationTimeout to take effect, the gate is
// off and the binding falls back to the provider workspace's Group subject. The answer
// holds for the Minter's lifetime (the gate is a server flag).
//
// A requester binding that already names the group subject is a previous Minter's
// finding, and is kept: probing would rebind it to the User subject, and kcp's
// authorizer, still seeing the group binding for a moment, would grant the token and
// make the probe report the gate on when it is off.
func (m *Minter) ensureDetectingGate(ctx context.Context, ws client.Client, cluster logicalcluster.Name, id Identity) (*Credential, error) {
	log := logr.FromContextOrDiscard(ctx)
	// Any error reading it (none there, a claim not accepted) is left to ensure below,
	// which reports it the usual way.
	existing := &rbacv1.ClusterRoleBinding{}
	if err := ws.Get(ctx, client.ObjectKey{Name: m.requesterName()}, existing); err == nil &&
		equality.Semantic.DeepEqual(existing.Subjects, id.Subjects(false)) {
		cred, err := m.ensure(ctx, ws, cluster, id.Subjects(false))
		if err != nil {
			return nil, fmt.Errorf("tokens: workspace %s: %w", cluster, err)
		}
		m.setGlobal(false)
		log.V(1).Info("keeping the provider workspace's group subject a previous run chose: kcp lacks the GlobalServiceAccount feature gate", "identity", id.Username)
		return cred, nil
	}
	cred, err := m.ensure(ctx, ws, cluster, id.Subjects(true))
	if err == nil {
		m.setGlobal(true)
		log.V(1).Info("kcp accepts global ServiceAccount subjects; binding the runtime by its own name", "identity", id.Username)
		return cred, nil
	}
	var refused *tokenRequestError
	if !errors.As(err, &refused) || !apierrors.IsForbidden(refused.err) {
		return nil, fmt.Errorf("tokens: workspace %s: %w", cluster, err)
	}
	cred, err = m.ensure(ctx, ws, cluster, id.Subjects(false))
	if err != nil {
		return nil, fmt.Errorf("tokens: workspace %s: falling back to the provider workspace's group subject: %w", cluster, err)
	}
	m.setGlobal(false)
	log.Info("kcp lacks the GlobalServiceAccount feature gate: tenants' token-requester bindings name every ServiceAccount of the provider workspace",
		"identity", id.Username, "group", id.Subjects(false)[0].Name)
	return cred, nil
}

func (m *Minter) setGlobal(v bool) {
	m.mu.Lock()
	m.global = &v
	m.mu.Unlock()
}
