package platformservice

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/openmcp-project/controller-utils/pkg/clusteraccess"
	"github.com/openmcp-project/controller-utils/pkg/pairs"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/bearer"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// Purposes of a Grant. They name its ServiceAccount "<provider>--<purpose>", like the
// suffixes of standard mode's requests.
const (
	// PurposeEndUser is the end-user access (what standard mode orders for the MCP).
	PurposeEndUser = "mcp"
	// PurposeWorkload is the workload access (what standard mode orders on a workload
	// cluster).
	PurposeWorkload = "wl"
)

// Labels on everything a Grant creates, besides openMCP's managed-by label. Together
// they select exactly one grant's objects, so that a sweep never touches another
// tenant's, another purpose's or another provider's.
const (
	// TenantLabel holds the tenant namespace.
	TenantLabel = "platform.services.open-control-plane.io/tenant"
	// PurposeLabel holds the grant's purpose.
	PurposeLabel = "platform.services.open-control-plane.io/grant"
)

// DefaultTokenTTL is the lifetime of the tokens a Grant mints (renewed at 80 %, as
// openMCP's access tokens are). The access carries the renewal time (cluster.Access
// RenewAt), so the engine reconciles again right after it and the provider hands its
// workers the new token before the old one expires.
const DefaultTokenTTL = time.Hour

// minTokenTTL is the shortest lifetime the TokenRequest API accepts.
const minTokenTTL = 10 * time.Minute

// GrantOptions configure a Grant.
type GrantOptions struct {
	// ProviderName names the ServiceAccount and RBAC and is the managed-by label.
	ProviderName string
	// Purpose is PurposeEndUser or PurposeWorkload.
	Purpose string
	// Permissions are what the ServiceAccount is allowed: the provider's declaration,
	// with the semantics of an AccessRequest's spec.token (a ClusterRole per permission
	// without namespace, a Role in the namespace otherwise, a binding per roleRef).
	Permissions cluster.Permissions
	// TokenTTL is the requested token lifetime; default DefaultTokenTTL, at least ten
	// minutes.
	TokenTTL time.Duration
	// WaitingReason is the Ready reason while RBAC is being recreated; default
	// WaitingForAccess.
	WaitingReason string
	// Scheme of the clients handed out.
	Scheme *runtime.Scheme
	// Tune adjusts the REST config of the clients handed out.
	Tune func(*rest.Config)
}

// Grant gives tenants scoped access to the platform cluster: per tenant, a
// ServiceAccount "<provider>--<purpose>" in the tenant namespace, RBAC granting exactly
// the declared permissions, and a TokenRequest token rendered into a kubeconfig for the
// platform's API server. It implements engine.WorkloadAccess and backs the tenancy's
// end-user access.
//
// It is what the platform's AccessRequest controller does for an MCP or a workload
// cluster, done by the runtime itself because the platform cluster is no Cluster the
// platform grants access to. The runtime may: openmcp-operator binds cluster-admin to
// every provider it deploys.
type Grant struct {
	c      client.Client
	server server
	opts   GrantOptions

	mu    sync.Mutex
	cache map[string]grantEntry // by tenant namespace
}

// server is what a kubeconfig needs to reach the platform's API server.
type server struct {
	host       string
	ca         []byte
	serverName string
	insecure   bool
}

type grantEntry struct {
	saUID   types.UID
	renewAt time.Time
	access  *cluster.Access
}

var _ interface {
	Ensure(context.Context, access.Key) (*cluster.Access, error)
	Lookup(context.Context, access.Key) (*cluster.Access, error)
	Release(context.Context, access.Key) (bool, error)
} = &Grant{}

// NewGrant returns a Grant that creates its objects with c (the runtime's own, uncached
// platform client) and writes cfg's server and CA into the kubeconfigs it hands out.
// In a pod, cfg is the in-cluster config: its address is the cluster-internal one, which
// is right, since the workers that use the kubeconfigs run on the platform cluster.
func NewGrant(c client.Client, cfg *rest.Config, opts GrantOptions) (*Grant, error) {
	var errs []error
	if opts.ProviderName == "" {
		errs = append(errs, errors.New("no provider name"))
	}
	if opts.Purpose == "" {
		errs = append(errs, errors.New("no purpose"))
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.TokenTTL < minTokenTTL {
		errs = append(errs, fmt.Errorf("token lifetime %s is below the TokenRequest minimum of %s", opts.TokenTTL, minTokenTTL))
	}
	if opts.WaitingReason == "" {
		opts.WaitingReason = v1alpha1.ReasonWaitingForAccess
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			errs = append(errs, fmt.Errorf("reading the platform CA file: %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("platform %s grant: %w", opts.Purpose, errors.Join(errs...))
	}
	return &Grant{
		c:      c,
		server: server{host: cfg.Host, ca: ca, serverName: cfg.ServerName, insecure: cfg.Insecure},
		opts:   opts,
		cache:  map[string]grantEntry{},
	}, nil
}

// ServiceAccountName is the name of the grant's ServiceAccount in every tenant
// namespace.
func (g *Grant) ServiceAccountName() string {
	return g.opts.ProviderName + "--" + g.opts.Purpose
}

// Ensure creates or repairs the tenant's ServiceAccount and RBAC and returns access
// with a valid token. While the token is fresh and the ServiceAccount unchanged it only
// reads the ServiceAccount: RBAC is re-applied whenever a token is minted (at least
// every TokenTTL*0.8, and after every restart), which is when openMCP's AccessRequest
// controller repairs drift too.
func (g *Grant) Ensure(ctx context.Context, key access.Key) (*cluster.Access, error) {
	ns := key.Identity.TenantNamespace()
	sa, err := g.serviceAccount(ctx, ns)
	if err != nil {
		return nil, err
	}
	if sa != nil {
		if a := g.cached(ns, sa.UID); a != nil {
			return a, nil
		}
	}
	if _, err := clusteraccess.EnsureNamespace(ctx, g.c, ns); err != nil {
		return nil, fmt.Errorf("tenant namespace %s: %w", ns, err)
	}
	if sa, err = clusteraccess.EnsureServiceAccount(ctx, g.c, g.ServiceAccountName(), ns, g.labels(ns)...); err != nil {
		return nil, fmt.Errorf("platform %s access: %w", g.opts.Purpose, err)
	}
	keep, err := g.ensureRBAC(ctx, sa, ns)
	if clusteraccess.IsWaitingForRecreationError(err) {
		return nil, &access.WaitingError{Reason: g.opts.WaitingReason, RequeueAfter: time.Second,
			Message: "waiting for a changed role binding on the platform cluster to be recreated"}
	}
	if err != nil {
		return nil, fmt.Errorf("platform %s access: %w", g.opts.Purpose, err)
	}
	if err := g.sweep(ctx, ns, keep); err != nil {
		return nil, fmt.Errorf("platform %s access: removing outdated RBAC: %w", g.opts.Purpose, err)
	}
	return g.mint(ctx, ns, sa)
}

// Lookup returns access if the tenant's ServiceAccount exists, minting a token when
// needed but creating nothing else; nil when there is none (never granted).
func (g *Grant) Lookup(ctx context.Context, key access.Key) (*cluster.Access, error) {
	ns := key.Identity.TenantNamespace()
	sa, err := g.serviceAccount(ctx, ns)
	if err != nil || sa == nil {
		return nil, err
	}
	if a := g.cached(ns, sa.UID); a != nil {
		return a, nil
	}
	return g.mint(ctx, ns, sa)
}

// Release deletes the tenant's ServiceAccount, which invalidates every token minted for
// it, and its RBAC. The tenant namespace stays: it may hold the provider's own objects
// or another grant's.
func (g *Grant) Release(ctx context.Context, key access.Key) (bool, error) {
	ns := key.Identity.TenantNamespace()
	sa := &corev1.ServiceAccount{}
	sa.Name, sa.Namespace = g.ServiceAccountName(), ns
	if err := g.c.Delete(ctx, sa); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting ServiceAccount %s/%s: %w", ns, sa.Name, err)
	}
	if err := g.sweep(ctx, ns, nil); err != nil {
		return false, fmt.Errorf("deleting RBAC of ServiceAccount %s/%s: %w", ns, sa.Name, err)
	}
	g.mu.Lock()
	delete(g.cache, ns)
	g.mu.Unlock()
	return true, nil
}

// serviceAccount reads the tenant's ServiceAccount; nil when there is none.
func (g *Grant) serviceAccount(ctx context.Context, ns string) (*corev1.ServiceAccount, error) {
	sa := &corev1.ServiceAccount{}
	err := g.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: g.ServiceAccountName()}, sa)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ServiceAccount %s/%s: %w", ns, g.ServiceAccountName(), err)
	}
	return sa, nil
}

// cached returns the cached access while its token is fresh and was minted for this
// ServiceAccount (a recreated one invalidates the old tokens).
func (g *Grant) cached(ns string, uid types.UID) *cluster.Access {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.cache[ns]
	if !ok || e.saUID != uid || !time.Now().Before(e.renewAt) {
		return nil
	}
	return e.access
}

// mint requests a token for sa and caches the access built from it.
func (g *Grant) mint(ctx context.Context, ns string, sa *corev1.ServiceAccount) (*cluster.Access, error) {
	tok, err := bearer.Request(ctx, g.opts.TokenTTL, func(ctx context.Context, tr *authenticationv1.TokenRequest) error {
		return g.c.SubResource("token").Create(ctx, sa, tr)
	})
	if err != nil {
		return nil, fmt.Errorf("platform %s access: token of ServiceAccount %s/%s: %w", g.opts.Purpose, sa.Namespace, sa.Name, err)
	}
	kcfg, err := g.kubeconfig(tok.Value)
	if err != nil {
		return nil, err
	}
	a, err := access.FromKubeconfig(kcfg, g.opts.Scheme, g.opts.Tune)
	if err != nil {
		return nil, fmt.Errorf("platform %s access: %w", g.opts.Purpose, err)
	}
	// The engine calls the provider again soon after RenewAt, and this Grant mints a
	// new token by then, so a worker's copy is replaced before it expires whatever the
	// poll interval.
	a.RenewAt = tok.RenewAt()
	g.mu.Lock()
	g.cache[ns] = grantEntry{saUID: sa.UID, renewAt: a.RenewAt, access: a}
	g.mu.Unlock()
	return a, nil
}

// kubeconfig renders a kubeconfig for token at the platform's API server.
func (g *Grant) kubeconfig(token string) ([]byte, error) {
	return kubeconfig.Render("platform", kubeconfig.Server{
		URL: g.server.host, CAData: g.server.ca, TLSServerName: g.server.serverName, Insecure: g.server.insecure,
	}, token)
}

func (g *Grant) labelMap(ns string) map[string]string {
	return map[string]string{
		openmcpconst.ManagedByLabel: g.opts.ProviderName,
		TenantLabel:                 ns,
		PurposeLabel:                g.opts.Purpose,
	}
}

func (g *Grant) labels(ns string) []clusteraccess.Label {
	return pairs.MapToPairs(g.labelMap(ns))
}

// rbacName names one (Cluster)Role or binding of the grant. The names a provider may
// give its permissions are not used: on the platform cluster, role names must be unique
// per tenant and purpose and must never meet the platform's own roles.
func (g *Grant) rbacName(ns, suffix string) string {
	return fmt.Sprintf("%s--%s--%s:%s", g.opts.ProviderName, ns, g.opts.Purpose, suffix)
}

// ensureRBAC applies the declared permissions to sa and returns the keys of what it
// applied.
func (g *Grant) ensureRBAC(ctx context.Context, sa *corev1.ServiceAccount, ns string) (map[string]bool, error) {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
	lbls := g.labels(ns)
	keep := map[string]bool{}
	for i, perm := range g.opts.Permissions.Rules {
		name := g.rbacName(ns, fmt.Sprint(i))
		if perm.Namespace == "" {
			if _, _, err := clusteraccess.EnsureClusterRoleAndBinding(ctx, g.c, name, subjects, perm.Rules, lbls...); err != nil {
				return nil, fmt.Errorf("permission %d: %w", i, err)
			}
			keep[rbacKey("ClusterRole", "", name)] = true
			keep[rbacKey("ClusterRoleBinding", "", name)] = true
			continue
		}
		if !perm.DisableAutomaticNamespaceCreation {
			if _, err := clusteraccess.EnsureNamespace(ctx, g.c, perm.Namespace); err != nil {
				return nil, fmt.Errorf("permission %d: %w", i, err)
			}
		}
		if _, _, err := clusteraccess.EnsureRoleAndBinding(ctx, g.c, name, perm.Namespace, subjects, perm.Rules, lbls...); err != nil {
			return nil, fmt.Errorf("permission %d: %w", i, err)
		}
		keep[rbacKey("Role", perm.Namespace, name)] = true
		keep[rbacKey("RoleBinding", perm.Namespace, name)] = true
	}
	for j, ref := range g.opts.Permissions.RoleRefs {
		name := g.rbacName(ns, fmt.Sprintf("ref-%d", j))
		switch ref.Kind {
		case "ClusterRole":
			if _, err := clusteraccess.EnsureClusterRoleBinding(ctx, g.c, name, ref.Name, subjects, lbls...); err != nil {
				return nil, fmt.Errorf("roleRef %d: %w", j, err)
			}
			keep[rbacKey("ClusterRoleBinding", "", name)] = true
		case "Role":
			if _, err := clusteraccess.EnsureRoleBinding(ctx, g.c, name, ref.Namespace, ref.Name, subjects, lbls...); err != nil {
				return nil, fmt.Errorf("roleRef %d: %w", j, err)
			}
			keep[rbacKey("RoleBinding", ref.Namespace, name)] = true
		default:
			return nil, fmt.Errorf("roleRef %d has unknown kind %q", j, ref.Kind)
		}
	}
	return keep, nil
}

// sweep deletes the grant's RBAC objects of tenant ns that are not in keep (all of them
// for a nil keep).
func (g *Grant) sweep(ctx context.Context, ns string, keep map[string]bool) error {
	sel := client.MatchingLabels(g.labelMap(ns))
	lists := []struct {
		kind string
		list client.ObjectList
	}{
		{"ClusterRoleBinding", &rbacv1.ClusterRoleBindingList{}},
		{"ClusterRole", &rbacv1.ClusterRoleList{}},
		{"RoleBinding", &rbacv1.RoleBindingList{}},
		{"Role", &rbacv1.RoleList{}},
	}
	var errs []error
	for _, l := range lists {
		if err := g.c.List(ctx, l.list, sel); err != nil {
			errs = append(errs, fmt.Errorf("listing %ss: %w", l.kind, err))
			continue
		}
		_ = meta.EachListItem(l.list, func(o runtime.Object) error {
			obj, ok := o.(client.Object)
			if !ok || keep[rbacKey(l.kind, obj.GetNamespace(), obj.GetName())] {
				return nil
			}
			if err := g.c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("deleting %s %s: %w", l.kind, client.ObjectKeyFromObject(obj), err))
			}
			return nil
		})
	}
	return errors.Join(errs...)
}

func rbacKey(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}
