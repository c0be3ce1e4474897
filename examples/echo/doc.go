// Package echo is the reference provider shipped with the runtime: a small service of
// the workerless pattern, written the way a provider author is expected to write one.
//
// A tenant creates an Echo object (on the onboarding cluster, or in a kcp workspace
// bound to the provider's APIExport). The provider runs, per tenant, an echo worker on
// a shared workload cluster: a Deployment of the worker version the tenant asked for,
// configured with the tenant's message, holding a kubeconfig for the tenant's end-user
// cluster (the ControlPlane in standard mode, the workspace in kcp mode). The worker
// would answer HTTP requests with the message; the image named in the sample
// ProviderConfig is illustrative, the provider does not depend on what it runs.
//
// What is here and why:
//   - provider.go is all the service logic: CreateOrUpdate and Delete. It has no
//     finalizer, ProviderConfig loading, cluster access, kcp, token, status-writing or
//     mode code (provider_source_test.go keeps it so): the runtime resolves the tenant's
//     clusters and config and hands them over on the context.
//   - runtime.go declares what the runtime needs to know: the types, the permissions on
//     the workload and end-user clusters, and, in Description, what the shared commands
//     need (the name, the embedded CRDs, the runtime, what local applies).
//   - api/v1alpha1 holds the Go types; their CRDs are generated into config/crd.
//   - config/ holds the provider's manifests: CRDs, the kcp identity's RBAC, the sample
//     APIBinding, the kcp schema for review, and samples.
//
// The binary cmd/kcp-serviceprovider runs this provider (init, run; with local in
// cmd/kcp-serviceprovider-local): its main
// function hands Description to command.Main.
package echo
