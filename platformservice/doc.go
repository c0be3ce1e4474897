// Package platformservice is platform-service mode: a service provider image deployed as
// an openMCP PlatformService, serving the platform cluster itself instead of tenants'
// ControlPlanes, with no change to the provider's code.
//
// Why a mode and not a second provider: tools like the External Secrets Operator,
// cert-manager, Velero or the metrics operator are wanted both in tenants' ControlPlanes
// (a ServiceProvider) and on the platform cluster (a PlatformService). The only
// difference is where the Service API object lives and which cluster is the end user's;
// both are the runtime's business (the Tenancy seam of package engine), so one image
// serves both, selected at deployment time (builder.Options.PlatformService).
//
// How the mode maps onto the runtime:
//
//   - The platform cluster is the single end-user "workspace". Service objects live on
//     it (multicluster-runtime's single-cluster provider, cluster name "platform"), next
//     to the ProviderConfig. No ControlPlane, no onboarding cluster, no MCP access is
//     involved.
//   - One object is served at a time (the singleton rule of kcp mode): a tool like ESO
//     installs cluster-wide CRDs and webhooks, so two installs on one cluster would
//     fight. The oldest object is served; the others are told which one is active.
//   - The tenant is the served object: cluster.PlatformIdentity(namespace, name), whose
//     tenant namespace is "platform--<uuid>".
//   - End-user access is a ServiceAccount of the platform cluster, in the tenant
//     namespace, bound to exactly the permissions the provider declares for MCPs
//     (builder MCPPermissions), with a TokenRequest token rendered into a kubeconfig
//     (see [Grant]). Not the runtime's own credential: openmcp-operator binds
//     cluster-admin to every provider it deploys, and the end-user kubeconfig is handed
//     to workers and written into Secrets, so passing it on would make every worker an
//     administrator of the platform.
//   - Workload access, for providers declaring WorkloadCluster, is the platform
//     cluster too, through a second ServiceAccount bound to the declared workload
//     permissions: the worker lands on the platform cluster, next to what it serves. No
//     workload cluster is ordered; a platform credential on a shared workload cluster
//     would cross the boundary between tenants and the platform, and a platform service
//     must not depend on cluster providers being up (it may be what they need).
//   - Status, finalizer, deletion order and ProviderConfig handling are the engine's,
//     exactly as in the other modes. Deletion removes both ServiceAccounts and their
//     RBAC, which revokes every token handed out.
//
// NewMode assembles these pieces for the manager the builder runs in this mode.
//
// The design note is docs/design/platform-service-mode.md.
package platformservice
