// Package engine is the one reconcile loop behind every mode.
//
// It is workspace-shaped: a request names a cluster (the onboarding cluster in standard
// mode, a logical cluster in kcp mode) and an object in it. What differs between modes
// (how the tenant is identified, how the end-user cluster is reached, whether a
// workspace may hold more than one object) sits behind the small Tenancy interface, so a
// new mode is a new Tenancy and a new multicluster provider, not a second engine.
//
// For one Service object the engine, in order: honours the operation annotation, loads
// the ProviderConfig, admits the object (the Tenancy decides; kcp and platform-service
// mode apply the singleton rule of singleton.go), adds the finalizer, resolves
// end-user and workload access, records the object on the tenant's request for the
// orphan sweep (orphan.go), calls the provider, and writes the status when it changed. Deletion runs the same resolution, calls Delete, releases workload access,
// then end-user access, then removes the finalizer.
//
// Every reconcile is observed once, at its end (observe.go): metrics from its result
// and duration, and events on the object for what changed between the status it read
// and the status it wrote. Deriving both from before/after keeps the reconcile code
// free of reporting and emits events only on transitions.
package engine
