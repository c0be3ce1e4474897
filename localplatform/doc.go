// Package localplatform is a stand-in for the openMCP platform components that answer
// ClusterRequests and AccessRequests: the openmcp-operator's scheduler and generic
// AccessRequest controller together with a cluster provider (Gardener, kind, ...).
//
// Why it exists: the real cluster providers need Docker or a cloud account, neither of
// which exists on a developer laptop without privileges or in this project's CI. Tests
// and local runs still have to exercise the exact protocol the runtime speaks with the
// platform (openmcp-operator lib's advanced clusteraccess), so this package plays the
// platform's side of that protocol against real API servers: a kube-apiserver holding
// the openMCP CRDs (the "platform cluster") and one or more kube-apiservers it hands out
// access to (the "target clusters", e.g. one for purpose "workload", one per
// ControlPlane for purpose "mcp"). It is a test double: runtime packages must never
// import it.
//
// What it does, on the platform cluster (a controller-runtime manager, see
// [Platform.Start] and [Platform.SetupWithManager]):
//
//   - ClusterRequests: adds the finalizer "clusters.openmcp.cloud/request", picks a
//     configured target with the requested purpose (the first one added, or the one
//     named by the [TargetAnnotation] on the request), ensures a Cluster object
//     describing it (spec.purposes, spec.tenancy, spec.profile, status.apiServer and
//     the "apiserver-external" endpoint, phase Ready) carrying the finalizer
//     "request.clusters.openmcp.cloud/<request uid>", and sets status.phase=Granted and
//     status.cluster. Targets with Shared tenancy are described by one Cluster object in
//     [Options.Namespace] named like the target; Exclusive targets get one Cluster object
//     per request, in the request's namespace and named like it. On deletion it removes
//     its finalizer from the Cluster (deleting per-request Cluster objects) and then its
//     own finalizer from the request, leaving the requester's finalizer to the requester,
//     as the real scheduler does.
//   - ControlPlanes: [Platform.RegisterControlPlane] creates what the openmcp-operator
//     creates for a ControlPlane: the namespace utils.StableMCPNamespace(name, namespace)
//     and, in it, a granted ClusterRequest named like the ControlPlane with purpose "mcp",
//     pointing at a Cluster object for the given target, so that AccessRequests with
//     spec.requestRef to it can be granted.
//   - AccessRequests with spec.token: adds its finalizer [AccessFinalizer], resolves
//     spec.requestRef to spec.clusterRef and sets the provider and profile labels (as the
//     openmcp-operator does), then on the target cluster creates a ServiceAccount in
//     [Options.AccessNamespace], exactly the requested RBAC (a Role and RoleBinding per
//     permission with a namespace, creating the namespace unless told not to; a
//     ClusterRole and ClusterRoleBinding per cluster-wide permission; a RoleBinding or
//     ClusterRoleBinding per roleRef), removes RBAC left over from an earlier generation,
//     mints a token with the TokenRequest API and writes the access Secret (keys
//     kubeconfig, token, host, ca.crt, expirationTimestamp and creationTimestamp, the
//     timestamps in Unix seconds) next to the request. Then it sets status.phase=Granted,
//     status.secretRef, status.observedGeneration=metadata.generation and the
//     [ConditionGranted] condition. The token is renewed, and the Secret updated, when 80 %
//     of its lifetime has passed. A new generation is granted anew. On deletion it removes
//     the ServiceAccount, the RBAC and the Secret, then its finalizer.
//   - spec.ttl of an AccessRequest: the request is deleted once spec.ttl has passed since
//     its creation (as the openmcp-operator does) and no token outlives it.
//   - Test controls: [Options.ClusterRequestPolicy] and [Options.AccessRequestPolicy]
//     grant, deny (phase Denied, with reason and message in the condition) or delay
//     (phase Pending until a point in time) each request; [Options.TokenTTL] sets the
//     token lifetime.
//
// With [Options.ClusterProviderOnly] the real openmcp-operator (its scheduler and
// access-request controller) runs against the same platform cluster and the platform
// plays only the part a cluster provider (cluster-provider-kind, -gardener) plays
// there; the ClusterRequest controller, the ClusterRequest policy and [TargetAnnotation]
// on requests are then unused:
//
//   - ClusterProfiles: [Platform.EnsureClusterProfiles] writes one per target, named
//     [Platform.ClusterProfileName], whose providerRef is [Options.ProviderName]. The
//     operator's purpose mappings put that name into spec.profile of the Clusters its
//     scheduler creates, and its access-request controller copies the providerRef into
//     the clusters.openmcp.cloud/provider label of AccessRequests for those Clusters.
//   - Clusters: every Cluster whose spec.profile is one of those profiles is reported
//     Ready with the target's API server as endpoint. Their creation and deletion are
//     the scheduler's.
//   - AccessRequests labelled with the provider name (routed: spec.clusterRef set by
//     the operator) are granted as above, but the access Secret holds only the keys
//     the real providers write: kubeconfig, creationTimestamp and expirationTimestamp.
//     spec.ttl is left to the operator, which deletes the request.
//
// Token lifetimes below ten minutes: the TokenRequest API refuses them, yet expiry tests
// need them. For such lifetimes the token is requested for ten minutes but bound (through
// TokenRequest's boundObjectRef) to an "anchor" Secret next to the ServiceAccount, and the
// anchor is deleted when the lifetime written into the access Secret has passed. The API
// server then rejects the token (allowing for its token authentication cache, ~10 s), so
// short-lived access really ends when the Secret says it does. Longer lifetimes use plain
// tokens, like the real providers.
//
// What it does not do: create, resize or delete clusters (targets are configured, not
// provisioned, and several Cluster objects may describe one API server, so isolation
// between "exclusive" clusters is by convention only); OIDC access (such requests are
// Denied); ClusterProfiles, scheduler strategies, tenancy limits, the operation
// annotation, or repairing drift on the target between renewals; deleting namespaces it
// created on a target. It trusts the admin credentials it is given and logs neither
// tokens nor kubeconfigs.
package localplatform
