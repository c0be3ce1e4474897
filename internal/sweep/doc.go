// Package sweep removes platform-side requests whose tenant is gone: the AccessRequests
// and ClusterRequests a runtime created (label openmcp.cloud/managed-by=<provider>) for
// a Service object that no longer exists (a finalizer removed by force, a kcp workspace
// unbound or deleted). Each leftover holds a ServiceAccount and RBAC on a workload
// cluster, so a leak is a security matter as much as a cost.
//
// Only this provider's requests carrying the mode's tenant label are considered. A
// tenant counts as gone only after Absences consecutive sweeps in which the engine's
// own view says so; an error counts as present. Before the requests go, the provider's
// Delete removes what it installed, with the engine's record of the last object it
// handed the provider (kept on the AccessRequest); the requests stay until Delete is
// done, AccessRequests before their ClusterRequest.
//
// The design note: docs/design/orphan-delete.md.
package sweep
