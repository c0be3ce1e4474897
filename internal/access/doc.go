// Package access turns openMCP ClusterRequests and AccessRequests into ready clients.
//
// Ordering and releasing requests is delegated to openmcp-operator's clusteraccess
// library (the same code the platform's own controllers use), so request names, labels,
// finalizers and the "granted at the current generation" rule are openMCP's. This
// package adds what the library leaves to its callers: telling a denied request from a
// pending one, reading the access Secret into a client and the raw kubeconfig, and
// caching that client until the Secret changes (a new client per reconcile would redo
// discovery every time).
//
// One job a file: requester.go orders and releases a tenant's requests (Ensure,
// Release), route.go creates the routed AccessRequest, grants.go turns a granted
// request into a cached client, backoff.go paces a tenant that waits or is denied and
// says why, records.go keeps the engine's record on the AccessRequest, namespaces.go
// the tenant's platform namespace.
package access
