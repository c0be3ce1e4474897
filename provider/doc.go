// Package provider is the seam between a service provider and the runtime.
//
// A provider implements Reconciler: CreateOrUpdate installs or updates the service for
// one Service object, Delete removes it. Everything else (finalizers, ProviderConfig
// loading and watching, cluster access, workspace tokens, status writing, deletion
// sequencing, mode detection) belongs to the runtime. Both methods read what the runtime
// resolved from the context with the accessors of package cluster.
//
// A Service API type implements Object by embedding v1alpha1.ServiceStatus in its
// status and returning a pointer to it. The runtime writes the whole status
// subresource once per reconcile: its own fields (Ready, phase, observed generation,
// identity) and whatever else the provider set on obj's status (a status type of the
// provider's own that embeds ServiceStatus inline, e.g. a list of installed parts
// each with a phase and message in the provider's words). Labels the provider sets or
// removes on obj are written too, key by key, so the user's labels stay.
package provider
