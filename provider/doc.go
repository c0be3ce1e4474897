// Package provider is the seam between a service provider and the runtime.
//
// A provider implements Reconciler: CreateOrUpdate installs or updates the service for
// one Service object, Delete removes it. Everything else (finalizers, ProviderConfig
// loading and watching, cluster access, workspace tokens, status writing, deletion
// sequencing, mode detection) belongs to the runtime. Both methods read what the runtime
// resolved from the context with the accessors of package cluster.
//
// A Service API type implements Object by embedding v1alpha1.ServiceStatus in its
// status and returning a pointer to it, so the runtime can write the status without
// knowing the provider's type.
package provider
