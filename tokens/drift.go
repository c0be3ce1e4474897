package tokens

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Drifted is told of a watch event on obj, an object carrying the Minter's labels in
// the tenant workspace cluster, and reports whether the object is no longer what the
// Minter keeps there (deleted, rules or subjects changed, the ServiceAccount replaced).
// Then the Minter stops trusting what it found before (Options.Recheck): the next
// Ensure reads every object again, repairs it and, for a replaced ServiceAccount,
// mints a new token. The Minter's own writes give no drift: they leave the objects as
// it wants them. Only workspaces the Minter serves can drift.
//
// An object under the Minter's names that it no longer wants (a role or binding of a
// RoleRef or namespace the provider's new release dropped) is stale: it is remembered,
// and the next Ensure or Remove of the workspace deletes it.
func (m *Minter) Drifted(cluster logicalcluster.Name, obj client.Object, deleted bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	entry, ok := m.cache[cluster]
	if m.isStale(obj) {
		m.noteStale(cluster, obj, deleted)
		if !ok || deleted {
			return false
		}
	} else if !ok || !m.differs(entry, obj, deleted) {
		return false
	}
	entry.checked = time.Time{}
	m.cache[cluster] = entry
	return true
}

// differs compares obj with what the Minter wants under its name.
func (m *Minter) differs(entry cacheEntry, obj client.Object, deleted bool) bool {
	sa := m.opts.ServiceAccount
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		if o.Namespace != sa.Namespace || o.Name != sa.Name {
			return false
		}
		return deleted || entry.saUID != "" && o.UID != entry.saUID
	case *rbacv1.ClusterRole, *rbacv1.Role:
		want, ok := m.role(o.GetNamespace(), o.GetName())
		if !ok {
			return false
		}
		if cr, ok := o.(*rbacv1.ClusterRole); ok && cr.AggregationRule != nil {
			return true
		}
		return deleted || !equality.Semantic.DeepEqual(*rulesOf(o), *rulesOf(want))
	case *rbacv1.ClusterRoleBinding, *rbacv1.RoleBinding:
		want, ok := m.binding(o.GetNamespace(), o.GetName())
		if !ok || kindOf(want) != kindOf(o) {
			return false
		}
		ref, subjects := bindingOf(want)
		if o.GetNamespace() == "" && o.GetName() == m.requesterName() {
			subjects = &entry.subjects
		}
		haveRef, haveSubjects := bindingOf(o)
		return deleted || *haveRef != *ref || *subjects != nil && !equality.Semantic.DeepEqual(*haveSubjects, *subjects)
	}
	return false
}

// isStale says whether obj, carrying the Minter's labels, is a binding or Role under
// one of the Minter's names that the declaration no longer asks for.
func (m *Minter) isStale(obj client.Object) bool {
	name, ns := obj.GetName(), obj.GetNamespace()
	if name == m.requesterName() || name != m.workloadName() && !strings.HasPrefix(name, m.workloadName()+"-") {
		return false
	}
	switch obj.(type) {
	case *rbacv1.Role:
		_, wanted := m.role(ns, name)
		return !wanted
	case *rbacv1.ClusterRoleBinding, *rbacv1.RoleBinding:
		want, wanted := m.binding(ns, name)
		return !wanted || kindOf(want) != kindOf(obj)
	}
	return false
}

// noteStale remembers or forgets a stale object of cluster; m.mu held.
func (m *Minter) noteStale(cluster logicalcluster.Name, obj client.Object, deleted bool) {
	key := staleKey{kind: kindOf(obj), key: client.ObjectKeyFromObject(obj)}
	if deleted {
		delete(m.stale[cluster], key)
		if len(m.stale[cluster]) == 0 {
			delete(m.stale, cluster)
		}
		return
	}
	if m.stale[cluster] == nil {
		m.stale[cluster] = map[staleKey]bool{}
	}
	m.stale[cluster][key] = true
}

// staleKey names a stale object.
type staleKey struct {
	kind string
	key  client.ObjectKey
}

// staleObjects are empty objects named like the stale objects known in cluster.
func (m *Minter) staleObjects(cluster logicalcluster.Name) []removable {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []removable
	for k := range m.stale[cluster] {
		meta := metav1.ObjectMeta{Namespace: k.key.Namespace, Name: k.key.Name}
		switch k.kind {
		case "Role":
			out = append(out, removable{k.kind, grRoles, &rbacv1.Role{ObjectMeta: meta}})
		case "RoleBinding":
			out = append(out, removable{k.kind, grRoleBindings, &rbacv1.RoleBinding{ObjectMeta: meta}})
		case "ClusterRoleBinding":
			out = append(out, removable{k.kind, grClusterRoleBindings, &rbacv1.ClusterRoleBinding{ObjectMeta: meta}})
		}
	}
	slices.SortFunc(out, func(a, b removable) int {
		return strings.Compare(a.kind+"/"+objectName(client.ObjectKeyFromObject(a.obj)), b.kind+"/"+objectName(client.ObjectKeyFromObject(b.obj)))
	})
	return out
}

// removeStale deletes the stale objects known in cluster. One that cannot be deleted
// now stays known, for the next Ensure; it grants nothing the tenant did not see
// granted before, so serving the workspace does not wait for it.
func (m *Minter) removeStale(ctx context.Context, ws client.Client, cluster logicalcluster.Name) {
	for _, o := range m.staleObjects(cluster) {
		err := ws.Delete(ctx, o.obj)
		if err == nil || apierrors.IsNotFound(err) {
			m.mu.Lock()
			m.noteStale(cluster, o.obj, true)
			m.mu.Unlock()
			continue
		}
		logr.FromContextOrDiscard(ctx).Info("could not delete what the provider no longer declares", "cluster", cluster,
			"kind", o.kind, "name", objectName(client.ObjectKeyFromObject(o.obj)), "reason", err.Error())
	}
}

// WatchedObjects are empty objects of the types the Minters keep in tenant
// workspaces, for a watch that feeds Drifted: Roles and RoleBindings only when
// namespaced is set (some Minter keeps Options.Namespaced), since only then does the
// export claim them and the virtual workspace serve them.
func WatchedObjects(namespaced bool) []client.Object {
	objs := []client.Object{&corev1.ServiceAccount{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}}
	if namespaced {
		objs = append(objs, &rbacv1.Role{}, &rbacv1.RoleBinding{})
	}
	return objs
}
