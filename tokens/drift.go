package tokens

import (
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Drifted is told of a watch event on obj, an object carrying the Minter's labels in
// the tenant workspace cluster, and reports whether the object is no longer what the
// Minter keeps there (deleted, rules or subjects changed, the ServiceAccount replaced).
// Then the Minter stops trusting what it found before (Options.Recheck): the next
// Ensure reads every object again, repairs it and, for a replaced ServiceAccount,
// mints a new token. The Minter's own writes give no drift: they leave the objects as
// it wants them. Only workspaces the Minter serves can drift.
func (m *Minter) Drifted(cluster logicalcluster.Name, obj client.Object, deleted bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	entry, ok := m.cache[cluster]
	if !ok || !m.differs(entry, obj, deleted) {
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
	case *rbacv1.ClusterRole:
		var want *rbacv1.ClusterRole
		switch o.Name {
		case m.requesterName():
			want = m.requesterRole()
		case m.workloadName():
			want = m.workloadRole()
		default:
			return false
		}
		return deleted || o.AggregationRule != nil || !equality.Semantic.DeepEqual(o.Rules, want.Rules)
	case *rbacv1.ClusterRoleBinding:
		role, ok := m.roleOfBinding(o.Name)
		if !ok {
			return false
		}
		subjects := m.workloadSubjects()
		if o.Name == m.requesterName() {
			subjects = entry.subjects
		}
		roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		return deleted || o.RoleRef != roleRef || subjects != nil && !equality.Semantic.DeepEqual(o.Subjects, subjects)
	}
	return false
}

// WatchedObjects are empty objects of the types the Minter keeps in tenant
// workspaces, for a watch that feeds Drifted.
func WatchedObjects() []client.Object {
	return []client.Object{&corev1.ServiceAccount{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}}
}
