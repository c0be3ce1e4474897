package tokens

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Removal is what [Minter.Remove] achieved in one tenant workspace.
type Removal struct {
	// Revoked says the workload ServiceAccount is gone, so kcp refuses every token
	// minted for it.
	Revoked bool
	// Left are the objects Remove could not delete, each with the reason.
	Left []Leftover
	// labels are the Minter's, for Explain.
	labels map[string]string
}

// Join is the removal of two credentials in one workspace (a provider's and its
// worker's, minted by two Minters): revoked when both are, with the leftovers of both.
func (r Removal) Join(o Removal) Removal {
	j := Removal{Revoked: r.Revoked && o.Revoked, Left: append(slices.Clone(r.Left), o.Left...), labels: r.labels}
	if j.labels == nil {
		j.labels = o.labels
	}
	return j
}

// Leftover is an object Remove could not delete.
type Leftover struct {
	// Kind and Name name the object (Name is namespace/name for the ServiceAccount).
	Kind, Name string
	// NotManaged says the object still exists but lost the Minter's labels, so a claim
	// narrowed to them hides it from the runtime: whoever removed the label took it
	// over, and only they can delete it.
	NotManaged bool
	// Err is why the delete failed when the object is still the runtime's; a
	// *ClaimNotAcceptedError when the tenant's APIBinding is the reason.
	Err error
}

func (l Leftover) String() string { return l.Kind + " " + l.Name }

// Done says the tenant's credential is revoked and nothing the runtime may still
// remove is left. Objects the tenant took over (NotManaged) are not waited for: they
// are the tenant's now, and the caller reports them.
func (r Removal) Done() bool { return r.Revoked && len(r.Pending()) == 0 }

// Pending are the leftovers the runtime is still responsible for: a later Remove can
// delete them once the tenant accepts the claim again (or the fault passes).
func (r Removal) Pending() []Leftover { return r.filter(false) }

// TakenOver are the leftovers that lost the runtime's labels.
func (r Removal) TakenOver() []Leftover { return r.filter(true) }

func (r Removal) filter(notManaged bool) []Leftover {
	var out []Leftover
	for _, l := range r.Left {
		if l.NotManaged == notManaged {
			out = append(out, l)
		}
	}
	return out
}

// Explain says in a tenant's words what is left and what would let the runtime
// finish. Empty when Done and nothing was taken over.
func (r Removal) Explain() string {
	var parts []string
	if pending := r.Pending(); len(pending) > 0 {
		// Group by cause: one sentence per distinct reason.
		var order []string
		byCause := map[string][]string{}
		for _, l := range pending {
			cause := l.Err.Error()
			var claim *ClaimNotAcceptedError
			if errors.As(l.Err, &claim) {
				cause = fmt.Sprintf("permission claim %q (verb %s) is not accepted by the APIBinding; accept it again so the runtime can finish, or remove the finalizer to leave them", claim.Resource.String(), claim.Verb)
			}
			if _, ok := byCause[cause]; !ok {
				order = append(order, cause)
			}
			byCause[cause] = append(byCause[cause], l.String())
		}
		for _, cause := range order {
			parts = append(parts, fmt.Sprintf("could not remove %s: %s", strings.Join(byCause[cause], ", "), cause))
		}
	}
	if taken := r.TakenOver(); len(taken) > 0 {
		names := make([]string, len(taken))
		for i, l := range taken {
			names[i] = l.String()
		}
		parts = append(parts, fmt.Sprintf("left %s to you: no longer labelled %s, so the runtime cannot see or remove it; delete it yourself",
			strings.Join(names, ", "), formatLabels(r.labels)))
	}
	if len(parts) == 0 {
		return ""
	}
	if r.Revoked {
		parts = append(parts, "the worker's ServiceAccount is deleted, so its tokens no longer work")
	} else {
		parts = append(parts, "the worker's ServiceAccount still exists, so its tokens still work until it is deleted")
	}
	return strings.Join(parts, "; ")
}

func formatLabels(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

// Remove deletes what Ensure created in the tenant workspace and forgets the cached
// token. It never creates or repairs anything, and it tries every object whatever
// happened to the others: the ServiceAccount first, since deleting it revokes every
// token minted for it, then the bindings and roles. Objects already gone count as
// removed; an object that answers NotFound is told apart from one that lost the
// Minter's labels (a claim narrowed to them hides it) by a dry-run create.
//
// The returned Removal says what is left and why; the error is for failures that say
// nothing about the objects (a missing option).
func (m *Minter) Remove(ctx context.Context, ws client.Client, cluster logicalcluster.Name) (Removal, error) {
	if err := m.init(); err != nil {
		return Removal{}, err
	}
	m.Forget(cluster)
	sa := m.opts.ServiceAccount
	objs := []removable{
		{"ServiceAccount", grServiceAccounts, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}},
		{"ClusterRoleBinding", grClusterRoleBindings, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: m.requesterName()}}},
		{"ClusterRoleBinding", grClusterRoleBindings, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: m.workloadName()}}},
		{"ClusterRole", grClusterRoles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: m.requesterName()}}},
		{"ClusterRole", grClusterRoles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: m.workloadName()}}},
	}
	for _, role := range m.opts.ClusterRoles {
		objs = append(objs, removable{"ClusterRoleBinding", grClusterRoleBindings, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: m.roleRefBindingName(role)}}})
	}
	for _, nr := range m.opts.Namespaced {
		at := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: nr.Namespace, Name: name} }
		if len(nr.Rules) > 0 {
			objs = append(objs,
				removable{"RoleBinding", grRoleBindings, &rbacv1.RoleBinding{ObjectMeta: at(m.workloadName())}},
				removable{"Role", grRoles, &rbacv1.Role{ObjectMeta: at(m.workloadName())}})
		}
		for _, role := range nr.Roles {
			objs = append(objs, removable{"RoleBinding", grRoleBindings, &rbacv1.RoleBinding{ObjectMeta: at(m.roleRefBindingName(role))}})
		}
	}
	objs = append(objs, m.staleObjects(cluster)...)
	r := Removal{labels: m.opts.Labels}
	for i, o := range objs {
		name := objectName(client.ObjectKeyFromObject(o.obj))
		err := ws.Delete(ctx, o.obj)
		gone := err == nil
		switch {
		case err == nil:
		case apierrors.IsNotFound(err) && !isResourceNotServed(err):
			if m.hidden(ctx, ws, o.obj) {
				r.Left = append(r.Left, Leftover{Kind: o.kind, Name: name, NotManaged: true})
				continue
			}
			gone = true
		default:
			err = classify(ctx, ws, o.gr, "delete", err)
			// kcp answers 403 for an object a label-selected claim hides, too.
			if apierrors.IsForbidden(err) && !errors.Is(err, ErrClaimNotAccepted) && m.hidden(ctx, ws, o.obj) {
				r.Left = append(r.Left, Leftover{Kind: o.kind, Name: name, NotManaged: true})
				continue
			}
			r.Left = append(r.Left, Leftover{Kind: o.kind, Name: name, Err: err})
		}
		if i == 0 {
			r.Revoked = gone
		}
	}
	return r, nil
}

// removable is one object Remove deletes.
type removable struct {
	kind string
	gr   schema.GroupResource
	obj  client.Object
}

// hidden says whether obj, which a delete through the virtual workspace did not find,
// exists all the same: a dry-run create of it (with the Minter's labels, so a claim
// narrowed to them allows it) answers AlreadyExists. Nothing is created. Any other
// answer counts as gone: the delete said so.
func (m *Minter) hidden(ctx context.Context, ws client.Client, obj client.Object) bool {
	probe := obj.DeepCopyObject().(client.Object)
	probe.SetLabels(maps.Clone(m.opts.Labels))
	if want, ok := m.binding(probe.GetNamespace(), probe.GetName()); ok && kindOf(want) == kindOf(probe) {
		// A binding needs its roleRef to pass validation; a role's rules may be empty.
		ref, _ := bindingOf(want)
		have, _ := bindingOf(probe)
		*have = *ref
	}
	return apierrors.IsAlreadyExists(ws.Create(ctx, probe, client.DryRunAll))
}
