package localplatform

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/controller-utils/pkg/clusteraccess"
	"github.com/openmcp-project/controller-utils/pkg/pairs"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
)

// TargetCluster is an API server the platform hands out access to.
type TargetCluster struct {
	// Name identifies the target; it names the Cluster object of a shared target and is
	// used as a label value, so it must be a DNS-1123 label.
	Name string
	// Purposes this target serves, e.g. "workload" or "mcp".
	Purposes []string
	// Tenancy is Shared (the default: one Cluster object for all requests) or Exclusive
	// (one Cluster object per request, all backed by this API server).
	Tenancy clustersv1alpha1.Tenancy
	// Profile names the pool the target belongs to; default: the target's name, a pool
	// of its own. Exclusive targets with the same purposes may form one pool by naming
	// the same Profile: they share one ClusterProfile (ClusterProfileName), and each
	// Cluster object of the pool is backed by one of them, recorded in its TargetLabel:
	// the target named by the TargetAnnotation of the ClusterRequest it serves,
	// otherwise the one backing the fewest Clusters. A DNS-1123 label.
	Profile string
	// Config with admin rights on the target; alternatively Kubeconfig.
	Config     *rest.Config
	Kubeconfig []byte
}

// target is a TargetCluster ready for use.
type target struct {
	TargetCluster
	// host is the URL written into Cluster objects and kubeconfigs.
	host string
	// caData is the CA bundle of the target's serving certificate.
	caData []byte
	client client.Client
}

// AddCluster makes a target cluster available to requests. It may be called while the
// platform runs; requests waiting for a target with its purpose are served within
// Options.RetryInterval.
func (p *Platform) AddCluster(tc TargetCluster) error {
	if errs := validation.IsDNS1123Label(tc.Name); len(errs) > 0 {
		return fmt.Errorf("localplatform: target name %q is invalid: %s", tc.Name, strings.Join(errs, "; "))
	}
	if len(tc.Purposes) == 0 {
		return fmt.Errorf("localplatform: target %q has no purposes", tc.Name)
	}
	if tc.Profile != "" {
		if errs := validation.IsDNS1123Label(tc.Profile); len(errs) > 0 {
			return fmt.Errorf("localplatform: profile %q of target %q is invalid: %s", tc.Profile, tc.Name, strings.Join(errs, "; "))
		}
	}
	switch tc.Tenancy {
	case "":
		tc.Tenancy = clustersv1alpha1.TENANCY_SHARED
	case clustersv1alpha1.TENANCY_SHARED, clustersv1alpha1.TENANCY_EXCLUSIVE:
	default:
		return fmt.Errorf("localplatform: target %q has unknown tenancy %q", tc.Name, tc.Tenancy)
	}
	var cfg *rest.Config
	switch {
	case tc.Config != nil && len(tc.Kubeconfig) > 0:
		return fmt.Errorf("localplatform: target %q sets both Config and Kubeconfig", tc.Name)
	case tc.Config != nil:
		cfg = rest.CopyConfig(tc.Config)
	case len(tc.Kubeconfig) > 0:
		var err error
		if cfg, err = clientcmd.RESTConfigFromKubeConfig(tc.Kubeconfig); err != nil {
			return fmt.Errorf("localplatform: parsing kubeconfig of target %q: %w", tc.Name, err)
		}
	default:
		return fmt.Errorf("localplatform: target %q has neither Config nor Kubeconfig", tc.Name)
	}
	// Kubeconfigs handed out must be self-contained, so a CA given as a file is read now.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return fmt.Errorf("localplatform: loading TLS files of target %q: %w", tc.Name, err)
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return fmt.Errorf("localplatform: server URL of target %q: %w", tc.Name, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: p.scheme})
	if err != nil {
		return fmt.Errorf("localplatform: creating client for target %q: %w", tc.Name, err)
	}
	tc.Config, tc.Kubeconfig = cfg, nil
	tc.Purposes = slices.Clone(tc.Purposes)
	t := &target{
		TargetCluster: tc,
		host:          strings.TrimSuffix(u.String(), "/"),
		caData:        cfg.CAData,
		client:        c,
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, existing := range p.targets {
		if existing.Name == tc.Name {
			return fmt.Errorf("localplatform: target %q already added", tc.Name)
		}
	}
	for _, member := range p.poolLocked(t.pool()) {
		// Any member may back any Cluster of the pool: they must be interchangeable.
		if t.Tenancy != clustersv1alpha1.TENANCY_EXCLUSIVE || member.Tenancy != clustersv1alpha1.TENANCY_EXCLUSIVE {
			return fmt.Errorf("localplatform: target %q joins the pool %q of target %q, which only exclusive targets can share", tc.Name, t.pool(), member.Name)
		}
		if !samePurposes(t.Purposes, member.Purposes) {
			return fmt.Errorf("localplatform: target %q (purposes %v) joins the pool %q of target %q (purposes %v), whose targets must serve the same purposes",
				tc.Name, t.Purposes, t.pool(), member.Name, member.Purposes)
		}
	}
	p.targets = append(p.targets, t)
	return nil
}

// pool is the name of the pool the target belongs to: its Profile, or its name.
func (t *target) pool() string {
	if t.Profile != "" {
		return t.Profile
	}
	return t.Name
}

// pool returns the targets of the named pool, in the order they were added.
func (p *Platform) pool(name string) []*target {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.poolLocked(name)
}

func (p *Platform) poolLocked(name string) []*target {
	var members []*target
	for _, t := range p.targets {
		if t.pool() == name {
			members = append(members, t)
		}
	}
	return members
}

// memberOf returns the target called name if it belongs to pool, or nil.
func memberOf(pool []*target, name string) *target {
	for _, t := range pool {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// samePurposes reports whether a and b hold the same purposes, in any order.
func samePurposes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// target returns the target with the given name, or nil.
func (p *Platform) target(name string) *target {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, t := range p.targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// targetFor returns the first target serving purpose, or nil.
func (p *Platform) targetFor(purpose string) *target {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, t := range p.targets {
		if slices.Contains(t.Purposes, purpose) {
			return t
		}
	}
	return nil
}

// minTokenRequestTTL is the shortest lifetime the TokenRequest API accepts.
const minTokenRequestTTL = 10 * time.Minute

// ensureRBAC creates, on t, the ServiceAccount of an AccessRequest and exactly the RBAC
// its current spec asks for, and deletes RBAC an earlier generation asked for.
func (p *Platform) ensureRBAC(ctx context.Context, ar *clustersv1alpha1.AccessRequest, t *target, id string) (*corev1.ServiceAccount, error) {
	c := t.client
	ns := p.opts.AccessNamespace
	if err := ensureNamespace(ctx, c, ns); err != nil {
		return nil, fmt.Errorf("on target %s: %w", t.Name, err)
	}
	lbl := pairs.New(AccessIDLabel, id)
	sa, err := clusteraccess.EnsureServiceAccount(ctx, c, "access-"+id, ns, lbl)
	if err != nil {
		return nil, fmt.Errorf("on target %s: %w", t.Name, err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}

	keep := map[string]bool{}
	for i, perm := range ar.Spec.Token.Permissions {
		name := perm.Name
		if name == "" {
			name = fmt.Sprintf("openmcp:%s:%d", id, i)
		}
		if perm.Namespace == "" {
			if _, _, err := clusteraccess.EnsureClusterRoleAndBinding(ctx, c, name, subjects, perm.Rules, lbl); err != nil {
				return nil, fmt.Errorf("on target %s, permission %d: %w", t.Name, i, err)
			}
			keep[refKey("ClusterRole", "", name)] = true
			keep[refKey("ClusterRoleBinding", "", name)] = true
			continue
		}
		if !perm.DisableAutomaticNamespaceCreation {
			if err := ensureNamespace(ctx, c, perm.Namespace); err != nil {
				return nil, fmt.Errorf("on target %s, permission %d: %w", t.Name, i, err)
			}
		}
		if _, _, err := clusteraccess.EnsureRoleAndBinding(ctx, c, name, perm.Namespace, subjects, perm.Rules, lbl); err != nil {
			return nil, fmt.Errorf("on target %s, permission %d: %w", t.Name, i, err)
		}
		keep[refKey("Role", perm.Namespace, name)] = true
		keep[refKey("RoleBinding", perm.Namespace, name)] = true
	}
	for j, ref := range ar.Spec.Token.RoleRefs {
		name := fmt.Sprintf("openmcp:%s:ref:%d", id, j)
		switch ref.Kind {
		case "ClusterRole":
			if _, err := clusteraccess.EnsureClusterRoleBinding(ctx, c, name, ref.Name, subjects, lbl); err != nil {
				return nil, fmt.Errorf("on target %s, roleRef %d: %w", t.Name, j, err)
			}
			keep[refKey("ClusterRoleBinding", "", name)] = true
		case "Role":
			if _, err := clusteraccess.EnsureRoleBinding(ctx, c, name, ref.Namespace, ref.Name, subjects, lbl); err != nil {
				return nil, fmt.Errorf("on target %s, roleRef %d: %w", t.Name, j, err)
			}
			keep[refKey("RoleBinding", ref.Namespace, name)] = true
		default:
			return nil, fmt.Errorf("roleRef %d has unknown kind %q", j, ref.Kind)
		}
	}
	if err := p.cleanupTarget(ctx, t, id, keep); err != nil {
		return nil, err
	}
	return sa, nil
}

// mintToken requests a token for sa living ttl. Below the TokenRequest API's minimum
// the token is bound to an anchor Secret that sweepAnchors deletes when ttl has passed,
// which revokes the token (see the package documentation).
func (p *Platform) mintToken(ctx context.Context, t *target, sa *corev1.ServiceAccount, id string, ttl time.Duration) (*clusteraccess.ServiceAccountToken, error) {
	// Whole seconds, as the access Secret records them.
	created := time.Now().Truncate(time.Second)
	expires := created.Add(ttl)
	tr := &authenticationv1.TokenRequest{}
	tr.Spec.ExpirationSeconds = ptr.To(int64(max(ttl, minTokenRequestTTL) / time.Second))
	if ttl < minTokenRequestTTL {
		anchor := &corev1.Secret{}
		anchor.GenerateName = sa.Name + "-"
		anchor.Namespace = sa.Namespace
		anchor.Labels = map[string]string{AccessIDLabel: id, tokenAnchorLabel: "true"}
		anchor.Annotations = map[string]string{expiresAtAnnotation: expires.UTC().Format(time.RFC3339)}
		anchor.Type = corev1.SecretTypeOpaque
		if err := t.client.Create(ctx, anchor); err != nil {
			return nil, fmt.Errorf("on target %s: creating token anchor: %w", t.Name, err)
		}
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{
			Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID,
		}
	}
	if err := t.client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("on target %s: requesting token for ServiceAccount %s/%s: %w", t.Name, sa.Namespace, sa.Name, err)
	}
	// The API server may cap the lifetime (--service-account-max-token-expiration).
	if exp := tr.Status.ExpirationTimestamp.Time; exp.Before(expires) {
		expires = exp.Truncate(time.Second)
	}
	return &clusteraccess.ServiceAccountToken{
		Token:               tr.Status.Token,
		CreationTimestamp:   created,
		ExpirationTimestamp: expires,
	}, nil
}

// sweepAnchors deletes the anchors on t whose tokens have expired and returns when the
// next one expires (zero if none is left).
func (p *Platform) sweepAnchors(ctx context.Context, t *target, id string) (time.Time, error) {
	list := &corev1.SecretList{}
	if err := t.client.List(ctx, list, client.InNamespace(p.opts.AccessNamespace),
		client.MatchingLabels{AccessIDLabel: id, tokenAnchorLabel: "true"}); err != nil {
		return time.Time{}, fmt.Errorf("on target %s: listing token anchors: %w", t.Name, err)
	}
	now := time.Now()
	var next time.Time
	for i := range list.Items {
		s := &list.Items[i]
		exp, err := time.Parse(time.RFC3339, s.Annotations[expiresAtAnnotation])
		if err == nil && now.Before(exp) {
			if next.IsZero() || exp.Before(next) {
				next = exp
			}
			continue
		}
		if err := t.client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("on target %s: deleting expired token anchor %s: %w", t.Name, s.Name, err)
		}
	}
	return next, nil
}

// cleanupTarget deletes the RBAC created on t for the AccessRequest with the given id,
// except what keep names (see refKey). With keep nil it deletes everything, including
// the ServiceAccount and the token anchors, which revokes all its tokens.
func (p *Platform) cleanupTarget(ctx context.Context, t *target, id string, keep map[string]bool) error {
	sel := client.MatchingLabels{AccessIDLabel: id}
	type listKind struct {
		kind string
		list client.ObjectList
		opts []client.ListOption
	}
	kinds := []listKind{
		{"RoleBinding", &rbacv1.RoleBindingList{}, nil},
		{"ClusterRoleBinding", &rbacv1.ClusterRoleBindingList{}, nil},
		{"Role", &rbacv1.RoleList{}, nil},
		{"ClusterRole", &rbacv1.ClusterRoleList{}, nil},
	}
	if keep == nil {
		inNS := []client.ListOption{client.InNamespace(p.opts.AccessNamespace)}
		kinds = append(kinds,
			listKind{"ServiceAccount", &corev1.ServiceAccountList{}, inNS},
			listKind{"Secret", &corev1.SecretList{}, inNS}, // the token anchors
		)
	}
	for _, k := range kinds {
		if err := t.client.List(ctx, k.list, append([]client.ListOption{sel}, k.opts...)...); err != nil {
			return fmt.Errorf("on target %s: listing %ss: %w", t.Name, k.kind, err)
		}
		items, err := meta.ExtractList(k.list)
		if err != nil {
			return fmt.Errorf("reading %s list: %w", k.kind, err)
		}
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok || keep[refKey(k.kind, obj.GetNamespace(), obj.GetName())] {
				continue
			}
			if err := t.client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("on target %s: deleting %s %s/%s: %w", t.Name, k.kind, obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// refKey identifies an object of a kind for cleanupTarget's keep set.
func refKey(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}
