// Package apiexport provisions a service provider's API surface in its kcp provider
// workspace: one APIResourceSchema per Service API CRD, an APIExport (apis.kcp.io/v1alpha2)
// that exports those resources and carries the permission claims the runtime needs, and
// the APIExportEndpointSlice a multicluster provider watches.
//
// Why it exists: in kcp a tenant gets a provider's Service API by binding an APIExport.
// The export is derived from the same CRD the provider installs on the onboarding
// cluster (one API type, two delivery surfaces), so the runtime creates it at start-up
// instead of every provider writing kcp plumbing.
//
// How it stays safe to run on every start and from several replicas at once:
//
//   - APIResourceSchemas are immutable and cannot be deleted while an export references
//     them. Each schema is therefore named after a short hash of its content
//     ("h<hash>.<plural>.<group>"): an unchanged CRD maps to the schema that already
//     exists, a changed CRD to a new one, and two replicas computing the same content
//     create the same name (the loser sees AlreadyExists and moves on). Old schemas are
//     left in place; kcp keeps serving bound tenants until their bindings move on.
//   - The APIExport is shared ground: an operator or another tool may have added
//     resources or claims. Provision merges: its own resources replace entries with the
//     same group and resource name, claims are merged by group, resource and identity
//     hash (verbs are united, never removed), everything else is left alone. Writes use
//     the resourceVersion read (optimistic concurrency) and are retried on conflict, and
//     nothing is written when the merge changes nothing.
//   - It then waits, with a deadline, for kcp to set the export's identity hash and for
//     the endpoint slice named like the export (kcp creates it; if it does not
//     appear, Provision creates it).
//
// Permission claims: [RequiredPermissionClaims] lists the claims the runtime itself
// needs in every tenant workspace (see package tokens): ServiceAccounts, ClusterRoles
// and ClusterRoleBindings with the verbs get, create, update and delete, and
// events.k8s.io events with create and patch (events on the tenant's Service objects).
// A tenant that accepts them lets the runtime create RBAC in its workspace; the verbs
// are kept minimal and the tenant may narrow the claims further with label selectors.
//
// The client passed to [Provision] points at the provider workspace and needs, there:
// apiresourceschemas get+create, apiexports get+create+update, apiexportendpointslices
// get+create, and (to create an endpoint slice) bind on the export. Its scheme must
// know apis.kcp.io v1alpha1 and v1alpha2.
package apiexport
