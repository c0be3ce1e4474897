// Package platformservice is platform-service mode: a service provider image deployed as
// an openMCP PlatformService, serving the platform cluster itself instead of tenants'
// ControlPlanes, with no change to the provider's code.
//
// The platform cluster is the one end-user "workspace": Service objects live on it next
// to the ProviderConfig, and the oldest is served (the singleton rule; a tool installing
// cluster-wide CRDs must not be installed twice). The tenant is the served object
// (cluster.PlatformIdentity). End-user and workload access are ServiceAccounts of the
// platform cluster bound to exactly what the provider declares ([Grant]), never the
// runtime's own credential, which the openmcp-operator binds to cluster-admin. No
// workload cluster is ordered. Status, finalizer, deletion order and ProviderConfig
// handling are the engine's, as in the other modes; deletion revokes every token handed
// out. NewMode assembles these pieces for the manager the builder runs.
//
// Why a mode and not a second provider, and what each choice rests on:
// docs/design/platform-service-mode.md.
package platformservice
