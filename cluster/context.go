// One file, one idea: the Tenant on ctx and every accessor of it, side by side, so
// that a provider author finds what the runtime hands over in one place.

package cluster

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// Secret is a Secret on the platform cluster, in the tenant's platform namespace,
	// whose Key holds Kubeconfig, renewed with it: for child objects on the platform
	// that take a kubeconfig by reference (a Flux HelmRelease's
	// spec.kubeConfig.secretRef). An access granted through an AccessRequest (standard
	// mode, every workload cluster) names the request's own Secret. kcp mode's
	// workspace accesses have none of their own: the runtime writes one for each when
	// the provider declared platform permissions (builder.Builder.PlatformPermissions)
	// and removes it with the access. nil otherwise, and in platform-service mode.
	Secret *SecretRef
}

// SecretRef names one key of a Secret on the platform cluster.
type SecretRef struct {
	Namespace, Name, Key string
}

// Endpoint is where an Access connects, split for workers configured by parts rather
// than by a kubeconfig.
type Endpoint struct {
	// URL is the whole server URL, path included: what a kubeconfig's server holds.
	URL string
	// Host and Port are the URL's; Port is filled in from the scheme when the URL has
	// none.
	Host, Port string
	// Path is the URL's path: in kcp mode /clusters/<logical cluster>, the workspace. A
	// worker that knows only host and port (KUBERNETES_SERVICE_HOST/PORT) reaches kcp's
	// front door, not the workspace: give it URL, or the kubeconfig.
	Path string
	// CAData is the PEM bundle the server's certificate is checked against.
	CAData []byte
}

// Endpoint returns where a connects; the zero Endpoint for nil.
func (a *Access) Endpoint() (Endpoint, error) {
	if a == nil || a.Config == nil {
		return Endpoint{}, nil
	}
	return EndpointOf(a.Config)
}

// EndpointOf splits where cfg connects, for code that holds a *rest.Config: in kcp
// mode the workspace is the URL's path, which host and port alone lose.
func EndpointOf(cfg *rest.Config) (Endpoint, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return Endpoint{}, fmt.Errorf("server URL of %s: %w", cfg.Host, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return Endpoint{URL: cfg.Host, Host: u.Hostname(), Port: port, Path: strings.TrimSuffix(u.Path, "/"), CAData: cfg.CAData}, nil
}

// MCPEndpointFromCtx is where the end-user cluster (MCPFromCtx) is: its URL with the
// kcp workspace's path, host, port and CA. ok is false when the runtime holds no
// end-user access on ctx.
func MCPEndpointFromCtx(ctx context.Context) (e Endpoint, ok bool, err error) {
	t := TenantFromCtx(ctx)
	if t == nil || t.MCP == nil || t.MCP.Config == nil {
		return Endpoint{}, false, nil
	}
	e, err = t.MCP.Endpoint()
	return e, err == nil, err
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
	// Worker is the end-user cluster again, with the credential the provider hands
	// its long-running worker: one of its own, allowed only what the provider declared
	// for the worker, when it declared that apart from its own rights (see
	// builder.Builder.WorkerMCPPermissions); otherwise the same as MCP. nil in Delete.
	Worker *Access
	// Workload is the workload cluster, nil when not requested or not yet granted.
	Workload *Access
	// Additional are the further clusters the provider declared
	// (builder.Builder.AdditionalCluster), by registration ID.
	Additional map[string]*Access
	// ProviderConfig is the provider's loaded ProviderConfig.
	ProviderConfig any
	// Platform reads the platform cluster, past every cache, with the runtime's rights
	// there (see PlatformFromCtx).
	Platform client.Reader
	// ProviderNamespace is the provider's own namespace on the platform cluster.
	ProviderNamespace string
	// PlatformWriter writes in the tenant's platform namespace only (see
	// PlatformWriterFromCtx); nil unless the provider declared platform permissions.
	PlatformWriter client.Client
	// Deletion is set in Delete only (see DeletionFromCtx).
	Deletion *Deletion
}

// Reach says whether Delete can reach one cluster, and if not, why.
type Reach string

const (
	// Reachable: the client on ctx works; remove what was installed there.
	Reachable Reach = "Reachable"
	// NotGranted: the runtime holds no access to the cluster for this tenant: it was
	// never granted (so nothing was installed there with it), or it was released
	// already. The client on ctx is nil.
	NotGranted Reach = "NotGranted"
	// NotDeclared: the provider declared no such cluster (no WorkloadCluster()).
	NotDeclared Reach = "NotDeclared"
	// Gone: the tenant is orphaned (Deletion.Orphaned) and its end-user cluster may no
	// longer exist; the runtime orders no access to it. The client on ctx is nil.
	Gone Reach = "Gone"
)

// Deletion tells Delete which deletion it serves and what it can reach, so that a
// provider branches on a reason instead of guessing from nil clients.
type Deletion struct {
	// Orphaned is true when the Service object is already gone (its finalizer removed
	// by hand, its kcp workspace force-removed) and the orphan sweep calls Delete with
	// the object as the runtime last handed it to CreateOrUpdate.
	Orphaned bool
	// EndUser is whether MCPFromCtx is set, and why not.
	EndUser Reach
	// Workload is whether WorkloadFromCtx is set, and why not.
	Workload Reach
}

// DeletionFromCtx is the deletion Delete serves. In CreateOrUpdate, or outside a
// runtime call (a provider's unit test), it is the zero Deletion, whose clusters are
// not Reachable; code shared by both paths tells them apart with LookupDeletion.
func DeletionFromCtx(ctx context.Context) Deletion {
	d, _ := LookupDeletion(ctx)
	return d
}

// LookupDeletion is DeletionFromCtx with ok: true in Delete, false in CreateOrUpdate
// and outside a runtime call.
func LookupDeletion(ctx context.Context) (d Deletion, ok bool) {
	if t := TenantFromCtx(ctx); t != nil && t.Deletion != nil {
		return *t.Deletion, true
	}
	return Deletion{}, false
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

// clientOf and kubeconfigOf read an Access that may be nil.
func clientOf(a *Access) client.Client {
	if a == nil {
		return nil
	}
	return a.Client
}

func kubeconfigOf(a *Access) []byte {
	if a == nil {
		return nil
	}
	return a.Kubeconfig
}

func mcp(t *Tenant) *Access      { return t.MCP }
func worker(t *Tenant) *Access   { return t.Worker }
func workload(t *Tenant) *Access { return t.Workload }

// AdditionalFromCtx is the access to a further cluster the provider declared with
// builder.Builder.AdditionalCluster under id (its Client, Config, Kubeconfig and
// Secret); nil when none was declared under id, and in Delete when it was never
// granted.
func AdditionalFromCtx(ctx context.Context, id string) *Access {
	return access(ctx, func(t *Tenant) *Access { return t.Additional[id] })
}

// MCPFromCtx is a client for the end-user cluster.
func MCPFromCtx(ctx context.Context) client.Client {
	return clientOf(access(ctx, mcp))
}

// MCPKubeconfigFromCtx is the raw end-user kubeconfig.
func MCPKubeconfigFromCtx(ctx context.Context) []byte {
	return kubeconfigOf(access(ctx, mcp))
}

// WorkerFromCtx is a client for the end-user cluster with the worker's credential
// (Tenant.Worker): what the worker will be allowed there, for a provider that checks
// it. nil in Delete.
func WorkerFromCtx(ctx context.Context) client.Client {
	return clientOf(access(ctx, worker))
}

// WorkerKubeconfigFromCtx is the raw end-user kubeconfig of the worker's credential:
// what a provider hands its long-running worker. Without worker rights declared apart
// it is MCPKubeconfigFromCtx's. Never log it.
func WorkerKubeconfigFromCtx(ctx context.Context) []byte {
	return kubeconfigOf(access(ctx, worker))
}

// WorkerConfigFromCtx is a copy of the REST config of the worker's credential, for
// workers configured by host, CA and token (see Access.Endpoint).
func WorkerConfigFromCtx(ctx context.Context) *rest.Config {
	return configOf(access(ctx, worker))
}

// WorkloadFromCtx is a client for the workload cluster, nil when not requested or not
// granted.
func WorkloadFromCtx(ctx context.Context) client.Client {
	return clientOf(access(ctx, workload))
}

// WorkloadKubeconfigFromCtx is the raw workload kubeconfig.
func WorkloadKubeconfigFromCtx(ctx context.Context) []byte {
	return kubeconfigOf(access(ctx, workload))
}

// MCPConfigFromCtx is a copy of the end-user cluster's REST config, for workers
// configured by host, CA and token; nil where MCPFromCtx is nil. In kcp mode its Host
// carries the workspace's path (see Endpoint).
func MCPConfigFromCtx(ctx context.Context) *rest.Config {
	return configOf(access(ctx, mcp))
}

// WorkloadConfigFromCtx is a copy of the workload cluster's REST config; nil where
// WorkloadFromCtx is nil.
func WorkloadConfigFromCtx(ctx context.Context) *rest.Config {
	return configOf(access(ctx, workload))
}

// configOf copies: a provider adjusting its worker's settings must not change the
// runtime's own connection.
func configOf(a *Access) *rest.Config {
	if a == nil || a.Config == nil {
		return nil
	}
	return rest.CopyConfig(a.Config)
}

// EndUserServes reports whether the end-user cluster serves kind gk. The modes differ
// here: a kcp workspace serves no apps/v1 (no Deployments, StatefulSets) unless an
// APIBinding brings it, where every ControlPlane does; a provider that would install a
// workload there asks first rather than failing with "no matches for kind". False
// outside a runtime call or without end-user access.
func EndUserServes(ctx context.Context, gk schema.GroupKind) (bool, error) {
	a := access(ctx, mcp)
	if a == nil || a.Client == nil {
		return false, nil
	}
	if _, err := a.Client.RESTMapper().RESTMapping(gk); err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovery of %s on the end-user cluster: %w", gk, err)
	}
	return true, nil
}

// PlatformFromCtx reads the platform cluster: for example the image pull secret a
// ProviderConfig names, to copy it to the workload cluster. It is read-only, reads
// past every cache, and goes through the runtime's own connection (its QPS, transport
// and metrics); what it may read is what the runtime's RBAC on the platform cluster
// grants. nil outside a runtime call.
func PlatformFromCtx(ctx context.Context) client.Reader {
	if t := TenantFromCtx(ctx); t != nil {
		return t.Platform
	}
	return nil
}

// PlatformWriterFromCtx writes the provider's child objects on the platform cluster:
// a Flux HelmRelease and its source, a values Secret. It reaches the tenant's platform
// namespace only (IdentityFromCtx(ctx).TenantNamespace(), where the runtime keeps the
// tenant's requests and kubeconfig Secrets): a read or write anywhere else, or of a
// cluster-scoped object, fails before it reaches the server. Its reads bypass every
// cache. It may do what the provider declared with builder.Builder.PlatformPermissions,
// and is nil when it declared none. The orphan sweep hands it to Delete too, so that a
// gone tenant's child objects are removed before its access is revoked.
func PlatformWriterFromCtx(ctx context.Context) client.Client {
	if t := TenantFromCtx(ctx); t != nil {
		return t.PlatformWriter
	}
	return nil
}

// MCPSecretFromCtx names the Secret on the platform cluster holding the end-user
// kubeconfig of MCPKubeconfigFromCtx (see Access.Secret); nil when there is none.
func MCPSecretFromCtx(ctx context.Context) *SecretRef {
	return secretOf(access(ctx, mcp))
}

// WorkerSecretFromCtx names the Secret holding the worker's end-user kubeconfig
// (WorkerKubeconfigFromCtx); nil when there is none.
func WorkerSecretFromCtx(ctx context.Context) *SecretRef {
	return secretOf(access(ctx, worker))
}

// WorkloadSecretFromCtx names the Secret holding the workload kubeconfig
// (WorkloadKubeconfigFromCtx); nil when there is none.
func WorkloadSecretFromCtx(ctx context.Context) *SecretRef {
	return secretOf(access(ctx, workload))
}

func secretOf(a *Access) *SecretRef {
	if a == nil || a.Secret == nil {
		return nil
	}
	ref := *a.Secret
	return &ref
}

// ProviderNamespaceFromCtx is the provider's own namespace on the platform cluster
// (POD_NAMESPACE), where a platform team keeps the provider's secrets.
func ProviderNamespaceFromCtx(ctx context.Context) string {
	if t := TenantFromCtx(ctx); t != nil {
		return t.ProviderNamespace
	}
	return ""
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
