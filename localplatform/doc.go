// Package localplatform is a stand-in for the openMCP platform components that answer
// ClusterRequests and AccessRequests: the openmcp-operator's scheduler and generic
// AccessRequest controller together with a cluster provider (Gardener, kind, ...).
//
// The real cluster providers need Docker or a cloud account, which neither a developer
// laptop without privileges nor this project's CI has. Tests and local runs still speak
// the exact protocol of the runtime with the platform, so this package plays the
// platform's side of it against real API servers: it grants ClusterRequests with Cluster
// objects for configured target API servers, and AccessRequests with a ServiceAccount,
// exactly the requested RBAC and a TokenRequest token in the access Secret, renewed at
// 80 % of its lifetime. With Options.ClusterProviderOnly the real openmcp-operator
// schedules and routes, and this package plays only a cluster provider's part.
//
// Exclusive targets serving the same purposes may form a pool (TargetCluster.Profile),
// for example several MCP API servers so that each tenant's ControlPlane has a server
// of its own: the pool shares one ClusterProfile, and each Cluster object of it is
// backed by one target, recorded in its TargetLabel, whose server is its endpoint and
// whose credentials the AccessRequests to it get. It is the target the
// TargetAnnotation of the Cluster's ClusterRequest names (RegisterControlPlane sets
// it), otherwise the one backing the fewest Clusters. An AccessRequest to a Cluster
// not assigned yet stays Pending until it is.
//
// It is a test double: the binary a platform deploys never links it
// (TestNoLocalPlatformInTheProduct in cmd/kcp-serviceprovider). What each controller
// does, the test controls, short token lifetimes and what it does not do:
// docs/design/local-platform.md.
package localplatform
