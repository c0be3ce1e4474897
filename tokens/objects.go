package tokens

import (
	"context"
	"errors"
	"fmt"
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
	changes = append(changes, more...)
	for _, role := range m.opts.ClusterRoles {
		// The role is the workspace's, not the Minter's: it carries no label the
		// cache watches, so it is read from the server; and a claim narrowed to the
		// Minter's labels hides it, which only a dry-run create tells from absence.
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}}
		if err := live.Get(ctx, client.ObjectKey{Name: role}, cr); err != nil {
			if !apierrors.IsNotFound(err) || isResourceNotServed(err) {
				return "", nil, classify(ctx, live, grClusterRoles, "get", fmt.Errorf("reading ClusterRole %s: %w", role, err))
			}
			if !m.hidden(ctx, live, cr) {
				return "", nil, &MissingClusterRoleError{Role: role}
			}
		}
		name := m.roleRefBindingName(role)
		c, err := m.ensureBinding(ctx, ws, name, role, m.workloadSubjects())
		if err != nil {
			return "", nil, err
		}
		changes = c.describe(changes, "ClusterRoleBinding", name)
	}
	return sa.UID, changes, nil
}

// roleRefBindingName names the binding of the workload to the workspace's ClusterRole
// role (Options.ClusterRoles).
func (m *Minter) roleRefBindingName(role string) string {
	return m.workloadName() + "-" + role
}

// roleOfBinding is the ClusterRole the Minter's binding name refers to; ok is false for
// a name that is none of its bindings.
func (m *Minter) roleOfBinding(name string) (role string, ok bool) {
	switch name {
	case m.requesterName(), m.workloadName():
		return name, true
	}
	for _, r := range m.opts.ClusterRoles {
		if name == m.roleRefBindingName(r) {
			return r, true
		}
	}
	return "", false
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
	bindingChange, err := m.ensureBinding(ctx, ws, role.Name, role.Name, subjects)
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

// ensureBinding makes the ClusterRoleBinding name bind the ClusterRole role to
// subjects. A binding with another roleRef (immutable) is deleted and recreated.
func (m *Minter) ensureBinding(ctx context.Context, ws client.Client, name, role string, subjects []rbacv1.Subject) (change, error) {
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
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
