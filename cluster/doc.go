// Package cluster is the provider's view of a tenant: the clusters the runtime resolved
// for one Service object, carried on the context passed to CreateOrUpdate and Delete.
//
// A provider never orders access, mints tokens or reads kubeconfig Secrets; it asks the
// context:
//
//	mcp := cluster.MCPFromCtx(ctx)               // end-user cluster: MCP or kcp workspace
//	wl := cluster.WorkloadFromCtx(ctx)           // nil when not requested or not granted
//	kcfg := cluster.MCPKubeconfigFromCtx(ctx)    // for the worker to reach the end user
//	ns := cluster.IdentityFromCtx(ctx).TenantNamespace() // stable per-tenant name
//	pw := cluster.PlatformWriterFromCtx(ctx)     // writes in that namespace on the platform
//	ref := cluster.MCPSecretFromCtx(ctx)         // a platform Secret holding kcfg (Flux)
//
// The same accessors answer in every mode, so install logic has no mode branches; Mode
// exists for the rare provider whose install genuinely differs.
package cluster
