package tokens

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/kcp-dev/logicalcluster/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// Options configure a [Minter].
type Options struct {
	// Direct authenticates as the runtime at kcp itself (not the virtual workspace),
	// with kcp's base URL as Host; a /clusters/<path> suffix is ignored. It is used
	// only for TokenRequests. It must not be the credential the virtual workspace
	// client uses: kcp v0.30.0 lets a token that was just used on the virtual
	// workspace act with the workspace's authority on direct calls for about ten
	// seconds (fixed in v0.31.0), which would hide missing RBAC.
	Direct *rest.Config
	// Identity is who Direct authenticates as. Zero: detected on first use with
	// DetectIdentity(Direct).
	Identity Identity
	// ProviderName names what the Minter creates in tenant workspaces:
	// ClusterRoles and ClusterRoleBindings "<ProviderName>-workload" and
	// "<ProviderName>-token-requester", and the default ServiceAccount. Required.
	ProviderName string
	// ServiceAccount is the workload's ServiceAccount in each tenant workspace; its
	// namespace must exist there. Default: default/<ProviderName>-workload.
	ServiceAccount types.NamespacedName
	// Rules is what the workload may do in its tenant workspace, as the provider
	// declares it. They are granted through a ClusterRole.
	Rules []rbacv1.PolicyRule
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
	// Clock is the time source for token renewal and Recheck; tests set a fake one.
	Clock clock.PassiveClock
	// Observe, if set, is told the outcome of every TokenRequest the Minter makes
	// (after its retries): renewal is false for a workspace's first token and true
	// when a cached one is replaced. For metrics; it must not block.
	Observe func(renewal bool, err error)
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
		opts.ServiceAccount.Name = opts.ProviderName + "-workload"
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
	m := &Minter{opts: opts, cache: map[logicalcluster.Name]cacheEntry{}}
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

func (m *Minter) workloadName() string  { return m.opts.ProviderName + "-workload" }
func (m *Minter) requesterName() string { return m.opts.ProviderName + "-token-requester" }

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

func (m *Minter) getIdentity(ctx context.Context) (Identity, error) {
	m.mu.Lock()
	id := m.identity
	m.mu.Unlock()
	if id != nil {
		return *id, nil
	}
	detected, err := DetectIdentity(ctx, m.opts.Direct)
	if err != nil {
		return Identity{}, fmt.Errorf("tokens: %w", err)
	}
	m.mu.Lock()
	m.identity = &detected
	m.mu.Unlock()
	return detected, nil
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
	saUID, changes, err := m.ensureObjects(ctx, ws, subjects)
	if err != nil {
		return nil, err
	}
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

// mint requests a token directly from kcp. Right after the Minter wrote RBAC, kcp's
// authorizer may not see it yet: then a refusal is retried until PropagationTimeout.
func (m *Minter) mint(ctx context.Context, cluster logicalcluster.Name, fresh bool) (*Credential, error) {
	sa := m.opts.ServiceAccount
	seconds := int64(m.opts.TTL / time.Second)
	var tr *authenticationv1.TokenRequest
	request := func(ctx context.Context) error {
		tr = &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
		return m.rest.Post().
			AbsPath("/clusters", cluster.String(), "api/v1/namespaces", sa.Namespace, "serviceaccounts", sa.Name, "token").
			Body(tr).Do(ctx).Into(tr)
	}
	issued := m.opts.Clock.Now()
	err := request(ctx)
	if err != nil && fresh && (apierrors.IsForbidden(err) || apierrors.IsNotFound(err)) {
		last := err
		// Back off from 100 ms, so a fast kcp answers quickly and a refusal that
		// persists costs about ten requests. The requests use ctx, not the wait's
		// deadline: a request cut short by it would hide kcp's last answer, which
		// decides the fallback.
		waitCtx, cancel := context.WithTimeout(ctx, m.opts.PropagationTimeout)
		defer cancel()
		backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 30}
		perr := wait.ExponentialBackoffWithContext(waitCtx, backoff, func(context.Context) (bool, error) {
			issued = m.opts.Clock.Now()
			last = request(ctx)
			switch {
			case last == nil:
				return true, nil
			case apierrors.IsForbidden(last) || apierrors.IsNotFound(last):
				return false, nil
			default:
				return false, last
			}
		})
		err = last
		if perr != nil && last == nil {
			err = perr
		}
	}
	if err != nil {
		return nil, &tokenRequestError{sa: sa, err: err}
	}
	if tr.Status.Token == "" {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s: kcp returned no token", sa)
	}
	expires := tr.Status.ExpirationTimestamp.Time
	server := m.base + logicalcluster.NewPath(cluster.String()).RequestPath()
	kc, err := renderKubeconfig(m.opts.Direct, server, cluster.String(), tr.Status.Token)
	if err != nil {
		return nil, err
	}
	return &Credential{
		Cluster:    cluster,
		Token:      tr.Status.Token,
		Kubeconfig: kc,
		ExpiresAt:  expires,
		RenewAt:    kubeconfig.RenewAt(issued, expires),
	}, nil
}

// tokenRequestError is a failed TokenRequest, told apart from failures of the virtual
// workspace writes before it.
type tokenRequestError struct {
	sa  types.NamespacedName
	err error
}

func (e *tokenRequestError) Error() string {
	return fmt.Sprintf("requesting a token for ServiceAccount %s: %v", e.sa, e.err)
}

func (e *tokenRequestError) Unwrap() error { return e.err }

// ensureObjects creates or repairs the ServiceAccount and both role/binding pairs. It
// returns the ServiceAccount's UID and whether it wrote anything.
//
// The runtime's own pair comes first: the TokenRequest that follows is refused until
// kcp's authorizer has seen that binding, and the three writes after it give it that
// time (with the binding written last, the benchmark at 100 workspaces saw 0.04 refused
// TokenRequests per workspace).
func (m *Minter) ensureObjects(ctx context.Context, ws client.Client, runtimeSubjects []rbacv1.Subject) (types.UID, []string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: m.opts.ServiceAccount.Namespace, Name: m.opts.ServiceAccount.Name}}
	changes, err := m.ensurePair(ctx, ws, m.requesterRole(), runtimeSubjects)
	if err != nil {
		return "", nil, err
	}
	c, err := upsert(ctx, ws, grServiceAccounts, sa, func(have *corev1.ServiceAccount) bool {
		return m.mergeLabels(&have.ObjectMeta)
	})
	if err != nil {
		return "", nil, err
	}
	changes = c.describe(changes, "ServiceAccount", client.ObjectKeyFromObject(sa).String())
	more, err := m.ensurePair(ctx, ws, m.workloadRole(), m.workloadSubjects())
	if err != nil {
		return "", nil, err
	}
	return sa.UID, append(changes, more...), nil
}

// requesterRole lets the runtime request the workload account's tokens, and nothing
// else.
func (m *Minter) requesterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: m.requesterName()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{m.opts.ServiceAccount.Name}},
			// kcp requires the verb access on / for any request into a workspace by
			// a user that is not a member of it.
			{NonResourceURLs: []string{"/"}, Verbs: []string{"access"}},
		},
	}
}

// workloadRole holds the rules the provider declares for its workload.
func (m *Minter) workloadRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: m.workloadName()}, Rules: m.opts.Rules}
}

func (m *Minter) workloadSubjects() []rbacv1.Subject {
	sa := m.opts.ServiceAccount
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
}

// ensurePair creates or repairs role and a binding of the same name to subjects, and
// describes what it changed.
func (m *Minter) ensurePair(ctx context.Context, ws client.Client, role *rbacv1.ClusterRole, subjects []rbacv1.Subject) ([]string, error) {
	rules := role.Rules
	roleChange, err := upsert(ctx, ws, grClusterRoles, role, func(have *rbacv1.ClusterRole) bool {
		changed := m.mergeLabels(&have.ObjectMeta)
		if !equality.Semantic.DeepEqual(have.Rules, rules) || have.AggregationRule != nil {
			have.Rules, have.AggregationRule = rules, nil
			changed = true
		}
		return changed
	})
	if err != nil {
		return nil, err
	}
	bindingChange, err := m.ensureBinding(ctx, ws, role.Name, subjects)
	if err != nil {
		return nil, err
	}
	changes := roleChange.describe(nil, "ClusterRole", role.Name)
	return bindingChange.describe(changes, "ClusterRoleBinding", role.Name), nil
}

var (
	grServiceAccounts     = schema.GroupResource{Resource: "serviceaccounts"}
	grClusterRoles        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	grClusterRoleBindings = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrolebindings"}
	// conflictBackoff spaces retries of a write that lost a race; each re-reads.
	conflictBackoff = wait.Backoff{Steps: 6, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5}
)

// ensureBinding makes the ClusterRoleBinding name bind the ClusterRole name to
// subjects. A binding with another roleRef (immutable) is deleted and recreated.
func (m *Minter) ensureBinding(ctx context.Context, ws client.Client, name string, subjects []rbacv1.Subject) (change, error) {
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: roleRef, Subjects: subjects}
	c, err := upsert(ctx, ws, grClusterRoleBindings, b, func(have *rbacv1.ClusterRoleBinding) bool {
		if have.RoleRef != roleRef {
			return false // replaced below
		}
		changed := m.mergeLabels(&have.ObjectMeta)
		if !equality.Semantic.DeepEqual(have.Subjects, subjects) {
			have.Subjects = subjects
			changed = true
		}
		return changed
	})
	if err == nil && b.RoleRef == roleRef {
		return c, nil
	}
	if err != nil {
		return unchanged, err
	}
	// Someone bound another role under our name; the roleRef cannot be changed.
	if err := ws.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
		return unchanged, classify(ctx, ws, grClusterRoleBindings, "delete", fmt.Errorf("replacing ClusterRoleBinding %s: %w", name, err))
	}
	b = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: roleRef, Subjects: subjects}
	if _, err := upsert(ctx, ws, grClusterRoleBindings, b, func(*rbacv1.ClusterRoleBinding) bool { return false }); err != nil {
		return unchanged, err
	}
	return updated, nil
}

// mergeLabels adds the Minter's labels to meta and says whether that changed it. Labels
// others put there stay.
func (m *Minter) mergeLabels(meta *metav1.ObjectMeta) bool {
	changed := false
	for k, v := range m.opts.Labels {
		if cur, ok := meta.Labels[k]; !ok || cur != v {
			if meta.Labels == nil {
				meta.Labels = map[string]string{}
			}
			meta.Labels[k] = v
			changed = true
		}
	}
	return changed
}

// change is what upsert did to an object.
type change uint8

const (
	unchanged change = iota
	created
	updated
)

// describe appends what c did to the object kind/name to changes, in words a tenant
// reads.
func (c change) describe(changes []string, kind, name string) []string {
	switch c {
	case created:
		return append(changes, kind+" "+name+" was missing")
	case updated:
		return append(changes, kind+" "+name+" had been changed")
	}
	return changes
}

// upsert reads obj's namesake; creates obj (with the Minter's labels, via the caller's
// mutate) if it is missing; otherwise lets mutate bring the read object in line and
// updates it if mutate reports a change. On return obj holds the server's object.
// Losing a race to another writer is retried from a fresh read. A create refused as
// AlreadyExists for an object the read did not find is one the claim's label selector
// hides: a *NotManagedError.
func upsert[T client.Object](ctx context.Context, ws client.Client, gr schema.GroupResource, obj T, mutate func(have T) bool) (change, error) {
	want := obj.DeepCopyObject().(T)
	key := client.ObjectKeyFromObject(obj)
	did := unchanged
	var notManaged *NotManagedError
	err := retry.OnError(conflictBackoff, func(err error) bool {
		return !errors.As(err, &notManaged) && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err))
	}, func() error {
		err := ws.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) && !isResourceNotServed(err) {
			fresh := want.DeepCopyObject().(T)
			mutate(fresh)
			if err := ws.Create(ctx, fresh); err != nil {
				if apierrors.IsAlreadyExists(err) {
					if gerr := ws.Get(ctx, key, obj); apierrors.IsNotFound(gerr) && !isResourceNotServed(gerr) {
						return &NotManagedError{Resource: gr, Name: objectName(key), Labels: fresh.GetLabels()}
					}
				}
				return classify(ctx, ws, gr, "create", err)
			}
			copyInto(obj, fresh)
			did = created
			return nil
		}
		if err != nil {
			return classify(ctx, ws, gr, "get", err)
		}
		if !mutate(obj) {
			return nil
		}
		if err := ws.Update(ctx, obj); err != nil {
			return classify(ctx, ws, gr, "update", err)
		}
		did = updated
		return nil
	})
	if err != nil {
		return unchanged, fmt.Errorf("ensuring %s %s: %w", gr.String(), key.String(), err)
	}
	return did, nil
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(key client.ObjectKey) string {
	if key.Namespace == "" {
		return key.Name
	}
	return key.String()
}

// copyInto copies src's content into dst (both the same pointer type).
func copyInto[T client.Object](dst, src T) {
	switch d := any(dst).(type) {
	case *corev1.ServiceAccount:
		*d = *any(src).(*corev1.ServiceAccount)
	case *rbacv1.ClusterRole:
		*d = *any(src).(*rbacv1.ClusterRole)
	case *rbacv1.ClusterRoleBinding:
		*d = *any(src).(*rbacv1.ClusterRoleBinding)
	default:
		panic(fmt.Sprintf("tokens: copyInto: unexpected type %T", dst))
	}
}

// Forget drops the cached token of cluster, e.g. when the tenant's workspace is gone
// or disengaged. The next Ensure mints a new one.
func (m *Minter) Forget(cluster logicalcluster.Name) {
	m.mu.Lock()
	delete(m.cache, cluster)
	m.mu.Unlock()
}
