// Package tokens gives a service's workload a credential for its tenant's kcp
// workspace: a token of a ServiceAccount in that workspace, allowed exactly what the
// provider declares, renewed before it expires and revoked when the tenant leaves.
//
// Why this way: the runtime reaches tenant workspaces through the APIExport virtual
// workspace, which serves only the exported and claimed resources (main resource and
// status, no other subresources), so it cannot request tokens there. A workload,
// in turn, needs an ordinary Kubernetes credential scoped to one workspace. kcp
// ServiceAccount tokens are exactly that: a token requested in a workspace carries
// that workspace's name and is accepted only there.
//
// The flow for one tenant workspace (see [Minter.Ensure]):
//
//  1. Through the virtual workspace, using the permission claims the tenant accepted
//     (serviceaccounts, clusterroles, clusterrolebindings; see
//     apiexport.RequiredPermissionClaims), the runtime creates the workload
//     ServiceAccount, a ClusterRole "<provider>-workload" with the provider's rules
//     bound to it, and a ClusterRole "<provider>-token-requester" granting create on
//     serviceaccounts/token for that one account plus the verb access on "/" (kcp
//     refuses any direct request into a workspace without it), bound to the runtime's
//     own identity.
//  2. Directly at kcp, <kcp>/clusters/<cluster>/api/v1/namespaces/<ns>/serviceaccounts/<sa>/token,
//     with a credential of the runtime's identity that is never used on the virtual
//     workspace, the runtime requests a token (TokenRequest) and renders a kubeconfig
//     for <kcp>/clusters/<cluster>.
//  3. The token is cached per workspace and handed out again until 80 % of its
//     lifetime has passed; then a new one is minted. Remove deletes the objects, which
//     invalidates the account's tokens.
//
// Naming the runtime in a tenant's binding (see [Identity.Subjects]): a plain user is
// bound by name. The runtime is normally a ServiceAccount of the provider workspace,
// which is foreign in every tenant workspace. With kcp's GlobalServiceAccount feature
// gate it can be bound precisely, as User
// "system:kcp:serviceaccount:<provider-cluster>:<namespace>:<name>". Without the gate
// only Group "system:cluster:<provider-cluster>" matches, which every ServiceAccount of
// the provider workspace holds: then the tenant trusts the whole provider workspace to
// mint the workload's tokens, so the provider workspace should hold no other
// ServiceAccounts than the runtime's. The Minter finds out which case applies by
// itself: it binds the User subject first and requests a token; if kcp still refuses
// after the binding had time to take effect (Options.PropagationTimeout), it falls
// back to the Group subject, logs that, and keeps the answer for its lifetime.
//
// What a tenant trusts by accepting the claims: the virtual workspace performs claimed
// writes with the tenant workspace's own authority, so the holder of the runtime's
// identity can create any ClusterRole and binding there, not just the ones this
// package writes. The claims' verbs are therefore few (list and watch only to notice
// tampering with the Minter's own objects, see Minter.Drifted), the
// Minter labels everything it creates (Options.Labels), and a tenant may accept the
// claims only for objects with those labels.
//
// Options.Direct is a different credential from the virtual workspace client's, so the
// runtime stays within its rights on a kcp with the token-cache bug described in the
// design note.
//
// Design note with the measured, dated facts and the tests that show them:
// docs/design/tenant-credentials.md.
package tokens
