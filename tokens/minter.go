package tokens

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure a [Minter].
type Options struct {
	// Direct authenticates as the runtime at kcp itself (not the virtual workspace),
	// with kcp's base URL as Host; a /clusters/<path> suffix is ignored. It is used
	// only for TokenRequests. It must not be the credential the virtual workspace
	// client uses, or a kcp token-cache bug could hide missing RBAC
	// (docs/design/tenant-credentials.md, "token-cache bug").
	Direct *rest.Config
	// Identity is who Direct authenticates as. Zero: detected on first use with
	// DetectIdentity(Direct).
	Identity Identity
	// ProviderName names what the Minter creates in tenant workspaces:
	// ClusterRoles and ClusterRoleBindings "<ProviderName>-workload" and
	// "<ProviderName>-token-requester", and the default ServiceAccount. Required.
	ProviderName string
	// Account tells apart the credentials of one provider when it keeps more than one
	// in each workspace (its own and its worker's): the Minter's objects are then
	// named "<ProviderName>-<Account>" and "<ProviderName>-<Account>-token-requester".
	// Empty keeps the names above.
	Account string
	// ServiceAccount is the workload's ServiceAccount in each tenant workspace; its
	// namespace must exist there. Default: default/<ProviderName>-workload.
	ServiceAccount types.NamespacedName
	// Rules is what the workload may do in its tenant workspace, as the provider
	// declares it. They are granted through a ClusterRole.
	Rules []rbacv1.PolicyRule
	// ClusterRoles are ClusterRoles of the workspace the workload is bound to as well
	// (the provider's RoleRefs, e.g. cluster-admin): one ClusterRoleBinding
	// "<workload>-<role>" each. The Minter creates no such role: one that does not
	// exist in the workspace fails Ensure with a *MissingError.
	ClusterRoles []string
	// Namespaced are what the workload may do in single namespaces of the workspace
	// (the provider's rules for a namespace and its Role refs), kept there as the
	// provider declares them rather than widened to the workspace. The virtual
	// workspace serves Roles and RoleBindings only when the export claims them
	// (apiexport.RoleClaims).
	Namespaced []NamespaceRights
	// TTL is the requested token lifetime (at least 10 minutes, Kubernetes' minimum).
	// Default 1 hour. kcp may shorten it; ExpiresAt reports what it granted.
	TTL time.Duration
	// Labels go on everything the Minter creates, e.g.
	// services.open-control-plane.io/managed-by=<provider>. Tenants can narrow the
	// claims they accept to objects with these labels.
	Labels map[string]string
	// GlobalServiceAccounts says whether kcp runs with the GlobalServiceAccount
	// feature gate; nil detects it (see the package documentation). Only matters
	// when Identity is a ServiceAccount.
	GlobalServiceAccounts *bool
	// PropagationTimeout bounds how long a TokenRequest refused right after the
	// Minter wrote RBAC is retried while kcp's authorizer catches up. Default 10 s.
	PropagationTimeout time.Duration
	// Recheck is how long the objects an Ensure found in order in a workspace are
	// trusted without reading them again, while the cached token is valid. A new
	// object is reconciled several times on its way to Ready (each grant of the
	// platform wakes it); reading the five objects each time was a quarter of the
	// runtime's requests per workspace, and with 30 s still half of its reads at 500
	// workspaces, where an object took two minutes to Ready. Drift (a tenant deleting
	// or widening the role) is repaired by the first Ensure after this interval: the
	// engine's poll reconciles call it at least once per poll interval. Default 2 min
	// (controller-runtime's own resync is 10 h); negative reads them on every Ensure.
	Recheck time.Duration
	// Cache, if set, answers the first read of each object an Ensure makes, in place
	// of a GET through the virtual workspace. A workspace's first Ensure then costs no
	// read at all: five creates where it took five GETs and five creates (a third of
	// the runtime's requests per new tenant). What the cache holds is only a hint: a
	// create refused as AlreadyExists, an update refused as a conflict, and every
	// retry read the server, so a stale cache costs a request, never a wrong object.
	Cache ObjectCache
	// Clock is the time source for token renewal and Recheck; tests set a fake one.
	Clock clock.PassiveClock
	// Observe, if set, is told the outcome of every TokenRequest the Minter makes
	// (after its retries): renewal is false for a workspace's first token and true
	// when a cached one is replaced. For metrics; it must not block.
	Observe func(renewal bool, err error)
}

// NamespaceRights are what the workload may do in one namespace of the workspace.
type NamespaceRights struct {
	// Namespace must exist in the workspace: it is the tenant's, and the Minter
	// creates none (a missing one fails Ensure with a *MissingError).
	Namespace string
	// Rules are granted through a Role "<workload>" in Namespace and a RoleBinding of
	// the same name.
	Rules []rbacv1.PolicyRule
	// Roles are Roles of Namespace the workload is bound to as well: one RoleBinding
	// "<workload>-<role>" each. A missing one fails Ensure with a *MissingError.
	Roles []string
}

// ObjectCache reads the objects a Minter keeps in tenant workspaces from a watch of
// them (kcpwatch.AccessWatch is one).
type ObjectCache interface {
	// Get fills obj with the cached object named key in the workspace cluster. It
	// returns a NotFound error when the cache is complete and holds no such object,
	// and another error when it cannot tell (not synced yet, type not watched).
	Get(cluster logicalcluster.Name, key client.ObjectKey, obj client.Object) error
}

// Minter provisions tenant workspaces with a workload ServiceAccount and the RBAC the
// provider declares, and mints that account's tokens. It is safe for concurrent use.
type Minter struct {
	opts Options

	initOnce sync.Once
	initErr  error
	base     string           // kcp base URL without /clusters
	rest     *rest.RESTClient // direct TokenRequests

	mu       sync.Mutex
	identity *Identity
	global   *bool // GlobalServiceAccount gate, once known
	cache    map[logicalcluster.Name]cacheEntry
	// stale are objects under the Minter's names it no longer wants, per workspace,
	// as the watch reported them (Drifted).
	stale map[logicalcluster.Name]map[staleKey]bool

	// detectMu serialises Ensure calls while the gate is unknown, so that one tenant
	// finds out and the others use the answer.
	detectMu sync.Mutex
}

type cacheEntry struct {
	cred  Credential
	saUID types.UID // a recreated ServiceAccount invalidates its tokens
	// checked is when the objects were last found in order, for subjects.
	checked  time.Time
	subjects []rbacv1.Subject
}

// New returns a Minter. Problems with opts are reported by the first Ensure.
func New(opts Options) *Minter {
	if opts.ServiceAccount.Name == "" {
		opts.ServiceAccount.Name = opts.ProviderName + "-" + cmp.Or(opts.Account, "workload")
	}
	if opts.ServiceAccount.Namespace == "" {
		opts.ServiceAccount.Namespace = metav1.NamespaceDefault
	}
	if opts.TTL == 0 {
		opts.TTL = time.Hour
	}
	if opts.PropagationTimeout <= 0 {
		opts.PropagationTimeout = 10 * time.Second
	}
	if opts.Recheck == 0 {
		opts.Recheck = 2 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Minter{opts: opts, cache: map[logicalcluster.Name]cacheEntry{}, stale: map[logicalcluster.Name]map[staleKey]bool{}}
	if opts.Identity.Username != "" {
		id := opts.Identity
		m.identity = &id
	}
	if opts.GlobalServiceAccounts != nil {
		g := *opts.GlobalServiceAccounts
		m.global = &g
	}
	return m
}

// ServiceAccount returns the workload ServiceAccount's namespace and name in tenant
// workspaces.
func (m *Minter) ServiceAccount() types.NamespacedName { return m.opts.ServiceAccount }

// Namespaced says whether the Minter keeps Roles and RoleBindings in namespaces of the
// workspaces (Options.Namespaced).
func (m *Minter) Namespaced() bool { return len(m.opts.Namespaced) > 0 }

func (m *Minter) workloadName() string {
	return m.opts.ProviderName + "-" + cmp.Or(m.opts.Account, "workload")
}

func (m *Minter) requesterName() string {
	if m.opts.Account == "" {
		return m.opts.ProviderName + "-token-requester"
	}
	return m.workloadName() + "-token-requester"
}

func (m *Minter) init() error {
	m.initOnce.Do(func() {
		switch {
		case m.opts.Direct == nil:
			m.initErr = errors.New("tokens: Options.Direct is required")
			return
		case m.opts.ProviderName == "":
			m.initErr = errors.New("tokens: Options.ProviderName is required")
			return
		case m.opts.TTL < 10*time.Minute:
			m.initErr = fmt.Errorf("tokens: TTL %s is below Kubernetes' minimum of 10 minutes", m.opts.TTL)
			return
		}
		m.base = baseURL(m.opts.Direct.Host)
		cfg := rest.CopyConfig(m.opts.Direct)
		cfg.Host = m.base
		cfg.APIPath = "/api"
		cfg.GroupVersion = &corev1.SchemeGroupVersion
		cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			m.initErr = fmt.Errorf("tokens: direct client: %w", err)
			return
		}
		if m.rest, err = rest.RESTClientForConfigAndClient(cfg, httpClient); err != nil {
			m.initErr = fmt.Errorf("tokens: direct client: %w", err)
		}
	})
	return m.initErr
}

// baseURL strips a /clusters/<path> suffix from a kcp URL.
func baseURL(host string) string {
	if i := strings.Index(host, "/clusters/"); i >= 0 {
		host = host[:i]
	}
	return strings.TrimSuffix(host, "/")
}

// Ensure makes the tenant workspace cluster hold the workload ServiceAccount, a
// ClusterRole with Options.Rules bound to it, and a ClusterRole that lets the runtime
// request that account's tokens (and nothing else), bound to the runtime's identity;
// then it returns a token of that account, cached until 80 % of its lifetime.
//
// ws reaches the tenant workspace through the APIExport virtual workspace
// (<vw-url>/clusters/<cluster>); it should read from the server, not from a cache, and
// its scheme must know core and RBAC types. Objects are written only when they are
// missing or differ. The token is requested directly from kcp with Options.Direct,
// since the virtual workspace serves no serviceaccounts/token.
//
// A claim the tenant has not accepted yields a *ClaimNotAcceptedError.
func (m *Minter) Ensure(ctx context.Context, ws client.Client, cluster logicalcluster.Name) (*Credential, error) {
	if err := m.init(); err != nil {
		return nil, err
	}
	if cluster.Empty() {
		return nil, errors.New("tokens: empty cluster name")
	}
	id, err := m.getIdentity(ctx)
	if err != nil {
		return nil, err
	}

	global, known := m.GlobalServiceAccounts()
	if !known && id.needsGateDetection() {
		m.detectMu.Lock()
		if global, known = m.GlobalServiceAccounts(); !known {
			defer m.detectMu.Unlock()
			return m.ensureDetectingGate(ctx, ws, cluster, id)
		}
		// Detected meanwhile by another caller: go on without the lock, or every
		// workspace that arrived during detection would be served one at a time.
		m.detectMu.Unlock()
	}
	cred, err := m.ensure(ctx, ws, cluster, id.Subjects(global))
	if err != nil {
		return nil, fmt.Errorf("tokens: workspace %s: %w", cluster, err)
	}
	return cred, nil
}

// ensure writes the objects with the given subjects for the runtime and returns a
// cached or new token. When the workspace had been served and something had to be
// repaired (a tenant deleted or changed one of the objects), the credential says what
// in Repaired.
func (m *Minter) ensure(ctx context.Context, ws client.Client, cluster logicalcluster.Name, subjects []rbacv1.Subject) (*Credential, error) {
	m.mu.Lock()
	entry, ok := m.cache[cluster]
	m.mu.Unlock()
	if now := m.opts.Clock.Now(); ok && now.Before(entry.cred.RenewAt) &&
		now.Sub(entry.checked) < m.opts.Recheck && equality.Semantic.DeepEqual(entry.subjects, subjects) {
		return entry.cred.clone(), nil
	}
	checked := m.opts.Clock.Now()
	saUID, changes, err := m.ensureObjects(ctx, ws, cluster, subjects)
	if err != nil {
		return nil, err
	}
	m.removeStale(ctx, ws, cluster)
	var repaired []string
	if ok && equality.Semantic.DeepEqual(entry.subjects, subjects) {
		repaired = changes
	}
	// A token stays valid while its ServiceAccount does (same UID), whatever else
	// was repaired.
	if ok && entry.saUID == saUID && m.opts.Clock.Now().Before(entry.cred.RenewAt) {
		entry.checked, entry.subjects = checked, subjects
		m.mu.Lock()
		m.cache[cluster] = entry
		m.mu.Unlock()
		return entry.cred.withRepaired(repaired), nil
	}
	cred, err := m.mint(ctx, cluster, len(changes) > 0)
	if m.opts.Observe != nil {
		m.opts.Observe(ok, err)
	}
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.cache[cluster] = cacheEntry{cred: *cred, saUID: saUID, checked: checked, subjects: subjects}
	m.mu.Unlock()
	return cred.withRepaired(repaired), nil
}

// Lookup returns a credential for the tenant workspace without creating or repairing
// anything, for the deletion path: the cached token while it is valid, else a token
// requested for the workload ServiceAccount as it is. Nil when there is none (the
// account or the runtime's permission is gone): deletion goes on without it.
func (m *Minter) Lookup(ctx context.Context, cluster logicalcluster.Name) *Credential {
	if m.init() != nil || cluster.Empty() {
		return nil
	}
	m.mu.Lock()
	entry, ok := m.cache[cluster]
	m.mu.Unlock()
	if ok && m.opts.Clock.Now().Before(entry.cred.ExpiresAt) {
		return entry.cred.clone()
	}
	cred, err := m.mint(ctx, cluster, false)
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("no workspace credential for deletion", "cluster", cluster, "reason", err.Error())
		return nil
	}
	// Kept for the deletion's next reconciles; checked stays zero, so an Ensure (the
	// object's deletion was undone) reads every object again.
	m.mu.Lock()
	m.cache[cluster] = cacheEntry{cred: *cred}
	m.mu.Unlock()
	return cred.clone()
}

// Forget drops the cached token of cluster, e.g. when the tenant's workspace is gone
// or disengaged. The next Ensure mints a new one.
func (m *Minter) Forget(cluster logicalcluster.Name) {
	m.mu.Lock()
	delete(m.cache, cluster)
	m.mu.Unlock()
}
