// Package restmapping keeps the REST mappings of a long-lived client in step with the
// cluster it talks to, as CRDs come and go.
//
// The runtime keeps each tenant's clients for as long as the grant holds (building one
// per reconcile would redo discovery every time). controller-runtime's dynamic REST
// mapper discovers a group when it is first asked for it and never forgets it, so a
// kind whose CRD was removed stays mapped: every request for it then answers the
// server's bare 404 ("the server could not find the requested resource") instead of
// "no matches for kind", and a provider that asks whether the kind is served is told
// yes for as long as the process lives.
//
// Mapper wraps that mapper and renews it: at once (at most once per
// Options.Recheck) when a request through a client of Client meets a 404 for a
// resource rather than for an object, and at its first use after Options.MaxAge. A
// kind found missing is asked for again at most once per Options.Recheck, so that a
// provider asking each reconcile for a kind the cluster does not serve (apps/v1 in a
// kcp workspace) sends no discovery request each time, and a kind added later is
// found within that interval. docs/design/rest-mappings.md has the reasoning.
package restmapping
