// Package localplatform is a stand-in for the openMCP platform components that answer
// ClusterRequests and AccessRequests: the openmcp-operator's scheduler and generic
// AccessRequest controller together with a cluster provider (Gardener, kind, ...).
//
// Real cluster providers need Docker or a cloud account, which neither an unprivileged
// laptop nor CI has. Tests and local runs still speak the runtime's exact protocol with
// the platform, so this package plays the platform's side against real API servers: it
// grants ClusterRequests with Cluster objects for configured targets, and
// AccessRequests with a ServiceAccount, exactly the requested RBAC and a renewed token
// in the access Secret. With Options.ClusterProviderOnly the real openmcp-operator
// schedules and routes and this package is only the cluster provider. Exclusive targets
// may form a pool behind one ClusterProfile (TargetCluster.Profile), so that each
// ControlPlane has a server of its own.
//
// It is a test double: the binary a platform deploys never links it
// (TestNoLocalPlatformInTheProduct). What each controller does, pools, token lifetimes
// and what it does not do: docs/design/local-platform.md.
package localplatform
