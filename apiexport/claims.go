package apiexport

import (
	"slices"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// requiredClaimVerbs are the verbs package tokens uses on each claimed resource through
// the virtual workspace: it reads an object, creates it when absent, updates it when it
// drifted, and deletes it when the tenant goes away; list and watch let the runtime
// notice within seconds when someone changes or deletes one of its objects
// (kcpwatch.AccessWatch). The runtime lists and watches only objects carrying its
// managed-by label, and a tenant narrowing the claims to that label shows it nothing
// else.
var requiredClaimVerbs = []string{"create", "delete", "get", "list", "update", "watch"}

// eventClaimVerbs are the verbs of the events claim: client-go's event recorder creates
// an event and patches it when the same event recurs. Nothing is read or deleted.
var eventClaimVerbs = []string{"create", "patch"}

// RequiredPermissionClaims returns the claims the runtime itself needs in every tenant
// workspace, so that it can create the workload ServiceAccount and the RBAC that lets
// the runtime mint that account's tokens (see package tokens): core serviceaccounts,
// rbac.authorization.k8s.io clusterroles and clusterrolebindings, each with get, list,
// watch, create, update and delete. Provision merges them into every export; documentation and the
// engine read them from here so all agree. The result is a fresh copy.
//
// Accepting these claims is an act of trust by the tenant: whoever holds the runtime's
// identity can create ClusterRoles and bindings in the tenant workspace (the virtual
// workspace forwards claimed writes with the workspace's authority), which is why the
// verbs are minimal and why tenants may narrow the claims with a label selector on the
// runtime's managed-by label.
//
// The fourth claim, events.k8s.io events with create and patch, lets the runtime
// record events on the tenant's Service objects in the tenant's workspace, so that
// `kubectl get events` there shows them (see docs/design/observability.md). kcp's
// virtual workspace refuses the runtime's events without it; a tenant that does not
// accept it loses the events, not the service.
func RequiredPermissionClaims() []apisv1alpha2.PermissionClaim {
	return []apisv1alpha2.PermissionClaim{
		claim("", "serviceaccounts", requiredClaimVerbs),
		claim("rbac.authorization.k8s.io", "clusterroles", requiredClaimVerbs),
		claim("rbac.authorization.k8s.io", "clusterrolebindings", requiredClaimVerbs),
		claim("events.k8s.io", "events", eventClaimVerbs),
	}
}

// RoleClaims are the claims a provider needs besides RequiredPermissionClaims when it
// declares permissions scoped to a namespace (rules for a namespace, Role refs):
// rbac.authorization.k8s.io roles and rolebindings with the same verbs, so that the
// runtime keeps those permissions in that namespace of each workspace instead of
// widening them to the workspace. Only such a provider's export carries them: every
// tenant of it accepts them, narrowed like the others to the runtime's label, and the
// tenants of other providers are asked for nothing more. The result is a fresh copy.
func RoleClaims() []apisv1alpha2.PermissionClaim {
	return []apisv1alpha2.PermissionClaim{
		claim("rbac.authorization.k8s.io", "roles", requiredClaimVerbs),
		claim("rbac.authorization.k8s.io", "rolebindings", requiredClaimVerbs),
	}
}

func claim(group, resource string, verbs []string) apisv1alpha2.PermissionClaim {
	return apisv1alpha2.PermissionClaim{
		GroupResource: apisv1alpha2.GroupResource{Group: group, Resource: resource},
		Verbs:         slices.Clone(verbs),
	}
}

// mergeClaims merges add into have: a claim with the same group, resource and identity
// hash gets the union of verbs (sorted, so the result is stable); others are appended.
// Verbs are never removed, since another writer of the export may rely on them and
// tenants have accepted them.
func mergeClaims(have, add []apisv1alpha2.PermissionClaim) []apisv1alpha2.PermissionClaim {
	out := make([]apisv1alpha2.PermissionClaim, len(have))
	for i := range have {
		out[i] = *have[i].DeepCopy()
	}
	for _, a := range add {
		i := slices.IndexFunc(out, func(c apisv1alpha2.PermissionClaim) bool { return c.EqualGRI(a) })
		if i < 0 {
			c := *a.DeepCopy()
			c.Verbs = unionVerbs(nil, c.Verbs)
			out = append(out, c)
			continue
		}
		out[i].Verbs = unionVerbs(out[i].Verbs, a.Verbs)
	}
	return out
}

// unionVerbs returns the sorted union of a and b, or a itself when b adds nothing (so
// an export written by someone else with unsorted verbs is not rewritten for nothing).
func unionVerbs(a, b []string) []string {
	missing := false
	for _, v := range b {
		if !slices.Contains(a, v) {
			missing = true
			break
		}
	}
	if !missing && a != nil {
		return a
	}
	out := slices.Clone(a)
	for _, v := range b {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// ManagedByLabel marks what the runtime creates in tenant workspaces, valued with the
// provider's name; tenants narrow the claims they accept to objects carrying it.
const ManagedByLabel = "services.open-control-plane.io/managed-by"

// AcceptedClaims are the claims of a tenant's APIBinding that lets provider serve it:
// every RequiredPermissionClaims and the export's further claims (RoleClaims, say),
// accepted for the objects labelled ManagedByLabel=provider only.
// config/kcp/tenant-apibinding.yaml says the same in YAML; tooling that creates
// bindings (and this project's tests) uses this.
func AcceptedClaims(provider string, further ...apisv1alpha2.PermissionClaim) []apisv1alpha2.AcceptablePermissionClaim {
	selector := apisv1alpha2.PermissionClaimSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{ManagedByLabel: provider}}}
	var out []apisv1alpha2.AcceptablePermissionClaim
	for _, c := range mergeClaims(RequiredPermissionClaims(), further) {
		out = append(out, apisv1alpha2.AcceptablePermissionClaim{
			ScopedPermissionClaim: apisv1alpha2.ScopedPermissionClaim{PermissionClaim: c, Selector: selector},
			State:                 apisv1alpha2.ClaimAccepted,
		})
	}
	return out
}
