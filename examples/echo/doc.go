// Package echo is the reference provider shipped with the runtime: a small service of
// the workerless pattern, written the way a provider author is expected to write one.
//
// A tenant creates an Echo (on the onboarding cluster, or in a kcp workspace bound to
// the provider's APIExport); the provider runs, per tenant, an echo worker Deployment on
// a shared workload cluster, holding a kubeconfig for the tenant's end-user cluster.
//
//   - provider.go is all the service logic, CreateOrUpdate and Delete, with no
//     finalizer, config loading, cluster access, kcp, token or status code
//     (provider_source_test.go keeps it so).
//   - runtime.go declares the types, the permissions on the workload and end-user
//     clusters and, in Description, what the shared commands need.
//   - api/v1alpha1 holds the Go types; config/ the CRDs, the kcp identity's RBAC, the
//     sample APIBinding, the kcp schema for review, and samples.
//
// cmd/kcp-serviceprovider hands Description to command.Main (with local:
// cmd/kcp-serviceprovider-local). The README beside this file says more.
package echo
