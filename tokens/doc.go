// Package tokens gives a service's workload a credential for its tenant's kcp
// workspace: a token of a ServiceAccount in that workspace, allowed exactly what the
// provider declares, renewed before it expires and revoked when the tenant leaves.
//
// The runtime reaches tenant workspaces through the APIExport virtual workspace, which
// cannot mint tokens. So [Minter.Ensure] creates, through the virtual workspace and
// the permission claims the tenant accepted, the ServiceAccount, its ClusterRole and
// binding, and a ClusterRole letting the runtime mint that one account's tokens. It
// then requests a token directly at kcp, with a credential never used on the virtual
// workspace (Options.Direct), and renders a kubeconfig for the workspace. Tokens are
// cached until 80 % of their lifetime; Remove deletes the objects, which revokes them.
// Everything it creates carries Options.Labels, so a tenant can accept the claims for
// those objects only, and Minter.Drifted tells of tampering.
//
// The credential flow, which subject names the runtime, the trust each claim extends,
// and the tests: docs/design/tenant-credentials.md.
package tokens
