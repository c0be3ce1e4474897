// Package sweep removes platform-side requests whose tenant is gone: the AccessRequests
// and ClusterRequests a runtime created (label openmcp.cloud/managed-by=<provider>) for
// a Service object that no longer exists.
//
// Why: the engine releases a tenant's requests in its deletion path, before it removes
// the finalizer. Anything that skips that path leaves them behind for good: a finalizer
// removed by hand or by force, a crash between the two steps of a platform that does not
// retry, a kcp workspace that unbinds the export or is deleted (the runtime loses access
// to the object before it can clean up). Each leftover holds a ServiceAccount and RBAC on
// a workload cluster, so leaks are a security matter as much as a cost.
//
// How it stays safe:
//   - Only requests labelled managed-by=<this provider> AND carrying the mode's tenant
//     label are considered; another provider's requests, or requests created by hand,
//     are never touched.
//   - A tenant counts as gone only when the engine's own view (Present) says so for
//     Absences consecutive sweeps, Interval apart. A workspace that is briefly not
//     engaged (kcp mode restarting, the virtual workspace reconnecting) therefore is
//     not swept; any error while checking counts as present.
//   - The first sweep runs one Interval after start, when the caches have long synced.
//   - AccessRequests go first; a tenant's ClusterRequest is deleted only when none of
//     its AccessRequests remain, the order openMCP's clusteraccess library keeps. The
//     library's finalizer is removed once it is the only one left, i.e. after the
//     platform released what it granted.
//   - Before the requests go, the provider's Delete removes what it created for the
//     tenant (Options.Delete, engine.DeleteOrphan), with the engine's record of the
//     last object it handed the provider, kept on the tenant's AccessRequest. A Delete
//     that fails or is in progress is called again at the next sweep, and the requests
//     stay until it is done: revoking first would take away the workload access the
//     Delete needs. A tenant without record (the provider was never called for it) is
//     only revoked.
//
// What it does not do: remove what the runtime created in a tenant's kcp workspace
// that still exists (its ServiceAccount and RBAC there) when the object was removed by
// hand; a deleted workspace takes them with it.
package sweep
