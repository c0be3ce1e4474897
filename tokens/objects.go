package tokens

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureObjects creates or repairs the ServiceAccount and both role/binding pairs. It
// returns the ServiceAccount's UID and whether it wrote anything.
//
// The runtime's own pair comes first: the TokenRequest that follows is refused until
// kcp's authorizer has seen that binding, and the three writes after it give it that
// time (written last, refusals were measurable: docs/design/measured.md).
func (m *Minter) ensureObjects(ctx context.Context, ws client.Client, cluster logicalcluster.Name, runtimeSubjects []rbacv1.Subject) (types.UID, []string, error) {
	live := ws
	ws = m.cachedFirst(ws, cluster)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: m.opts.ServiceAccount.Namespace, Name: m.opts.ServiceAccount.Name}}
	changes, err := m.ensurePair(ctx, ws, m.requesterRole(), runtimeSubjects)
	if err != nil {
		return "", nil, err
	}
	c, err := upsert(ctx, ws, grServiceAccounts, sa, func(have *corev1.ServiceAccount) bool {
		return m.mergeLabels(have)
	})
	if err != nil {
		return "", nil, err
	}
	changes = c.describe(changes, "ServiceAccount", client.ObjectKeyFromObject(sa).String())
	more, err := m.ensurePair(ctx, ws, m.workloadRole(), m.workloadSubjects())
	if err != nil {
		return "", nil, err
	}
	changes = append(changes, more...)
	for _, role := range m.opts.ClusterRoles {
		if err := m.mustExist(ctx, live, grClusterRoles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}); err != nil {
			return "", nil, err
		}
		b, _ := m.binding("", m.roleRefBindingName(role))
		c, err := m.ensureBinding(ctx, ws, b)
		if err != nil {
			return "", nil, err
		}
		changes = c.describe(changes, "ClusterRoleBinding", b.GetName())
	}
	for _, nr := range m.opts.Namespaced {
		if role, ok := m.role(nr.Namespace, m.workloadName()); ok {
			more, err := m.ensurePair(ctx, ws, role, m.workloadSubjects())
			if err != nil {
				return "", nil, err
			}
			changes = append(changes, more...)
		}
		for _, role := range nr.Roles {
			if err := m.mustExist(ctx, live, grRoles, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: nr.Namespace, Name: role}}); err != nil {
				return "", nil, err
			}
			b, _ := m.binding(nr.Namespace, m.roleRefBindingName(role))
			c, err := m.ensureBinding(ctx, ws, b)
			if err != nil {
				return "", nil, err
			}
			changes = c.describe(changes, "RoleBinding", nr.Namespace+"/"+b.GetName())
		}
	}
	return sa.UID, changes, nil
}

// roleRefBindingName names the binding of the workload to the workspace's role of that
// name (Options.ClusterRoles, NamespaceRights.Roles).
func (m *Minter) roleRefBindingName(role string) string {
	return m.workloadName() + "-" + role
}

// mustExist checks that role, a ClusterRole or Role of the workspace the provider binds
// its workload to, exists: a *MissingError when it does not. The role is the
// workspace's, not the Minter's: it carries no label the cache watches, so it is read
// from the server; and a claim narrowed to the Minter's labels hides it, which only a
// dry-run create tells from absence.
func (m *Minter) mustExist(ctx context.Context, live client.Client, gr schema.GroupResource, role client.Object) error {
	key := client.ObjectKeyFromObject(role)
	err := live.Get(ctx, key, role)
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err) || isResourceNotServed(err):
		return classify(ctx, live, gr, "get", fmt.Errorf("reading %s %s: %w", kindOf(role), objectName(key), err))
	case m.hidden(ctx, live, role):
		return nil
	}
	return &MissingError{Kind: kindOf(role), Namespace: key.Namespace, Name: key.Name}
}

// binding is the binding the Minter keeps under name in namespace (a
// ClusterRoleBinding when namespace is empty), as it wants it; ok is false for a name
// that is none of its bindings. The requester's binding has no subjects here: they are
// the runtime's identity, known to Ensure.
func (m *Minter) binding(namespace, name string) (b client.Object, ok bool) {
	kind, role := "", ""
	if namespace == "" {
		switch name {
		case m.requesterName(), m.workloadName():
			kind, role = "ClusterRole", name
		}
		for _, r := range m.opts.ClusterRoles {
			if name == m.roleRefBindingName(r) {
				kind, role = "ClusterRole", r
			}
		}
	}
	for _, nr := range m.opts.Namespaced {
		if nr.Namespace != namespace || namespace == "" {
			continue
		}
		if name == m.workloadName() && len(nr.Rules) > 0 {
			kind, role = "Role", name
		}
		for _, r := range nr.Roles {
			if name == m.roleRefBindingName(r) {
				kind, role = "Role", r
			}
		}
	}
	if kind == "" {
		return nil, false
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}
	var subjects []rbacv1.Subject
	if name != m.requesterName() || namespace != "" {
		subjects = m.workloadSubjects()
	}
	return newBinding(namespace, name, ref, subjects), true
}

// newBinding is a ClusterRoleBinding (namespace empty) or a RoleBinding in namespace.
func newBinding(namespace, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) client.Object {
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	if namespace == "" {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	}
	return &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
}

// role is the role the Minter keeps under name in namespace (a ClusterRole when
// namespace is empty) with the rules it wants there; ok is false for a role that is
// none of its own (a role it only binds is the workspace's).
func (m *Minter) role(namespace, name string) (r client.Object, ok bool) {
	if namespace == "" {
		switch name {
		case m.requesterName():
			return m.requesterRole(), true
		case m.workloadName():
			return m.workloadRole(), true
		}
		return nil, false
	}
	for _, nr := range m.opts.Namespaced {
		if nr.Namespace == namespace && name == m.workloadName() && len(nr.Rules) > 0 {
			return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: nr.Rules}, true
		}
	}
	return nil, false
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

// ensurePair creates or repairs role (a ClusterRole or a Role holding the rules the
// Minter wants) and a binding of the same name to subjects, and describes what it
// changed.
func (m *Minter) ensurePair(ctx context.Context, ws client.Client, role client.Object, subjects []rbacv1.Subject) ([]string, error) {
	rules := *rulesOf(role)
	gr, bindingKind := grClusterRoles, "ClusterRole"
	if role.GetNamespace() != "" {
		gr, bindingKind = grRoles, "Role"
	}
	roleChange, err := upsert(ctx, ws, gr, role, func(have client.Object) bool {
		changed := m.mergeLabels(have)
		if have := rulesOf(have); !equality.Semantic.DeepEqual(*have, rules) {
			*have = rules
			changed = true
		}
		if cr, ok := have.(*rbacv1.ClusterRole); ok && cr.AggregationRule != nil {
			cr.AggregationRule = nil
			changed = true
		}
		return changed
	})
	if err != nil {
		return nil, err
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: bindingKind, Name: role.GetName()}
	b := newBinding(role.GetNamespace(), role.GetName(), ref, subjects)
	bindingChange, err := m.ensureBinding(ctx, ws, b)
	if err != nil {
		return nil, err
	}
	name := objectName(client.ObjectKeyFromObject(role))
	changes := roleChange.describe(nil, kindOf(role), name)
	return bindingChange.describe(changes, kindOf(b), name), nil
}

// rulesOf is the rules field of a ClusterRole or Role.
func rulesOf(role client.Object) *[]rbacv1.PolicyRule {
	switch r := role.(type) {
	case *rbacv1.ClusterRole:
		return &r.Rules
	case *rbacv1.Role:
		return &r.Rules
	}
	panic(fmt.Sprintf("tokens: rulesOf: unexpected type %T", role))
}

// bindingOf is the role reference and subjects of a ClusterRoleBinding or RoleBinding.
func bindingOf(b client.Object) (*rbacv1.RoleRef, *[]rbacv1.Subject) {
	switch b := b.(type) {
	case *rbacv1.ClusterRoleBinding:
		return &b.RoleRef, &b.Subjects
	case *rbacv1.RoleBinding:
		return &b.RoleRef, &b.Subjects
	}
	panic(fmt.Sprintf("tokens: bindingOf: unexpected type %T", b))
}

// kindOf names the kind of one of the objects the Minter keeps or binds.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.ServiceAccount:
		return "ServiceAccount"
	case *rbacv1.ClusterRole:
		return "ClusterRole"
	case *rbacv1.ClusterRoleBinding:
		return "ClusterRoleBinding"
	case *rbacv1.Role:
		return "Role"
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	}
	return fmt.Sprintf("%T", obj)
}

var (
	grServiceAccounts     = schema.GroupResource{Resource: "serviceaccounts"}
	grClusterRoles        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	grClusterRoleBindings = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrolebindings"}
	grRoles               = schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}
	grRoleBindings        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}
	// conflictBackoff spaces retries of a write that lost a race; each re-reads.
	conflictBackoff = wait.Backoff{Steps: 6, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5}
)

// ensureBinding creates or repairs want, a ClusterRoleBinding or RoleBinding as the
// Minter wants it. A binding with another roleRef (immutable) is deleted and recreated.
func (m *Minter) ensureBinding(ctx context.Context, ws client.Client, want client.Object) (change, error) {
	gr := grClusterRoleBindings
	if want.GetNamespace() != "" {
		gr = grRoleBindings
	}
	roleRef, subjects := bindingOf(want)
	ref, subs := *roleRef, *subjects
	b := want.DeepCopyObject().(client.Object)
	c, err := upsert(ctx, ws, gr, b, func(have client.Object) bool {
		haveRef, haveSubjects := bindingOf(have)
		if *haveRef != ref {
			return false // replaced below
		}
		changed := m.mergeLabels(have)
		if !equality.Semantic.DeepEqual(*haveSubjects, subs) {
			*haveSubjects = subs
			changed = true
		}
		return changed
	})
	if err != nil {
		return unchanged, err
	}
	if haveRef, _ := bindingOf(b); *haveRef == ref {
		return c, nil
	}
	// Someone bound another role under our name; the roleRef cannot be changed.
	uid := b.GetUID()
	if err := ws.Delete(ctx, b, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return unchanged, classify(ctx, ws, gr, "delete", fmt.Errorf("replacing %s %s: %w", kindOf(want), objectName(client.ObjectKeyFromObject(want)), err))
	}
	if _, err := upsert(ctx, ws, gr, want.DeepCopyObject().(client.Object), func(client.Object) bool { return false }); err != nil {
		return unchanged, err
	}
	return updated, nil
}

// mergeLabels adds the Minter's labels to meta and says whether that changed it. Labels
// others put there stay.
func (m *Minter) mergeLabels(obj metav1.Object) bool {
	changed := false
	labels := obj.GetLabels()
	for k, v := range m.opts.Labels {
		if cur, ok := labels[k]; !ok || cur != v {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
			changed = true
		}
	}
	obj.SetLabels(labels)
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
// AlreadyExists is followed by a read from the server, and the object found is brought
// in line; if that read finds nothing either, the claim's label selector hides the
// object: a *NotManagedError.
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
			err := ws.Create(ctx, fresh)
			if err == nil {
				copyInto(obj, fresh)
				did = created
				return nil
			}
			if apierrors.IsNotFound(err) && !isResourceNotServed(err) && key.Namespace != "" {
				// A create answered NotFound names the namespace it was to go in.
				return &MissingError{Kind: "Namespace", Name: key.Namespace}
			}
			if !apierrors.IsAlreadyExists(err) {
				return classify(ctx, ws, gr, "create", err)
			}
			// It exists, but the read did not find it: the claim's label selector
			// hides it, or the read came from a cache that had not seen it yet.
			if gerr := ws.Get(ctx, key, obj); gerr != nil {
				if apierrors.IsNotFound(gerr) && !isResourceNotServed(gerr) {
					return &NotManagedError{Resource: gr, Name: objectName(key), Labels: fresh.GetLabels()}
				}
				return classify(ctx, ws, gr, "get", gerr)
			}
		} else if err != nil {
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
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// cachedFirst returns ws with its first read of each object served by Options.Cache,
// when there is one; every later read of the same object (a retry, the check after a
// create refused as AlreadyExists) goes to the server. A cache that cannot answer
// sends the read to the server too.
func (m *Minter) cachedFirst(ws client.Client, cluster logicalcluster.Name) client.Client {
	if m.opts.Cache == nil {
		return ws
	}
	return &cacheFirstClient{Client: ws, cache: m.opts.Cache, cluster: cluster, read: map[string]bool{}}
}

// cacheFirstClient is ws whose first Get of each object asks the cache. One Ensure
// uses it, from one goroutine.
type cacheFirstClient struct {
	client.Client
	cache   ObjectCache
	cluster logicalcluster.Name
	read    map[string]bool
}

func (c *cacheFirstClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	id := fmt.Sprintf("%T %s", obj, key)
	if !c.read[id] {
		c.read[id] = true
		if err := c.cache.Get(c.cluster, key, obj); err == nil || apierrors.IsNotFound(err) {
			return err
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
