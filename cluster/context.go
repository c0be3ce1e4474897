package cluster

import (
	"context"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Access is a ready connection to one cluster.
type Access struct {
	// Client talks to the cluster with the access the runtime obtained.
	Client client.Client
	// Config is the REST config behind Client.
	Config *rest.Config
	// Kubeconfig is the raw kubeconfig, for embedding into child resources (a worker's
	// Secret). Never log it.
	Kubeconfig []byte
	// RenewAt is when the credential behind Kubeconfig is due for renewal (80 % of its
	// lifetime); zero when it does not expire or the expiry is unknown. The runtime
	// calls the provider again soon after it, so that a worker's copy of Kubeconfig is
	// replaced before the old credential expires.
	RenewAt time.Time
}

// String never prints credentials.
func (a *Access) String() string {
	if a == nil || a.Config == nil {
		return "<no access>"
	}
	return "access to " + a.Config.Host
}

// Tenant is everything the runtime resolved for one Service object.
type Tenant struct {
	// Mode the object is served in.
	Mode Mode
	// Identity of the tenant.
	Identity Identity
	// MCP is the end-user cluster: the ControlPlane (standard), the workspace (kcp), or
	// the platform cluster (platform mode). nil in Delete when the orphan sweep calls
	// it for a tenant whose object is gone (see provider.Reconciler), and in Delete of
	// an object whose access was never granted.
	MCP *Access
	// Workload is the workload cluster, nil when not requested or not yet granted.
	Workload *Access
	// ProviderConfig is the provider's loaded ProviderConfig.
	ProviderConfig any
}

type tenantKey struct{}

// WithTenant returns a context carrying t. The runtime calls it; providers read.
func WithTenant(ctx context.Context, t *Tenant) context.Context {
	return context.WithValue(ctx, tenantKey{}, t)
}

// TenantFromCtx returns everything the runtime resolved, or nil outside a runtime call.
func TenantFromCtx(ctx context.Context) *Tenant {
	t, _ := ctx.Value(tenantKey{}).(*Tenant)
	return t
}

func access(ctx context.Context, pick func(*Tenant) *Access) *Access {
	if t := TenantFromCtx(ctx); t != nil {
		return pick(t)
	}
	return nil
}

func mcp(t *Tenant) *Access      { return t.MCP }
func workload(t *Tenant) *Access { return t.Workload }

// MCPFromCtx is a client for the end-user cluster.
func MCPFromCtx(ctx context.Context) client.Client {
	if a := access(ctx, mcp); a != nil {
		return a.Client
	}
	return nil
}

// MCPKubeconfigFromCtx is the raw end-user kubeconfig.
func MCPKubeconfigFromCtx(ctx context.Context) []byte {
	if a := access(ctx, mcp); a != nil {
		return a.Kubeconfig
	}
	return nil
}

// WorkloadFromCtx is a client for the workload cluster, nil when not requested or not
// granted.
func WorkloadFromCtx(ctx context.Context) client.Client {
	if a := access(ctx, workload); a != nil {
		return a.Client
	}
	return nil
}

// WorkloadKubeconfigFromCtx is the raw workload kubeconfig.
func WorkloadKubeconfigFromCtx(ctx context.Context) []byte {
	if a := access(ctx, workload); a != nil {
		return a.Kubeconfig
	}
	return nil
}

// IdentityFromCtx is the tenant's stable identity.
func IdentityFromCtx(ctx context.Context) Identity {
	if t := TenantFromCtx(ctx); t != nil {
		return t.Identity
	}
	return Identity{}
}

// ModeFromCtx is the mode the object is served in.
func ModeFromCtx(ctx context.Context) Mode {
	if t := TenantFromCtx(ctx); t != nil {
		return t.Mode
	}
	return ""
}

// ProviderConfigFromCtx returns the loaded ProviderConfig as the provider's type.
func ProviderConfigFromCtx[T any](ctx context.Context) T {
	var zero T
	t := TenantFromCtx(ctx)
	if t == nil {
		return zero
	}
	pc, _ := t.ProviderConfig.(T)
	return pc
}
