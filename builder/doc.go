// Package builder assembles a service provider runtime from what a provider declares:
// its Service API type, its ProviderConfig type, whether it needs a workload cluster,
// optionally its kcp API surface, and its Reconciler.
//
//	rt, err := builder.ServiceProvider[*v1alpha1.Widget]("widgets", scheme).
//		For(&v1alpha1.Widget{}).
//		WithProviderConfig(&v1alpha1.ProviderConfig{}).
//		WorkloadCluster(workload.Permissions{Rules: ...}).
//		Complete(&widgetProvider{})
//	...
//	err = rt.Start(ctx, builder.Options{Platform: platformCfg, Onboarding: onboardingCfg})
//
// The Runtime runs one multicluster manager per mode in the same process, each with its
// own leader election ID, all driving the same engine.
//
// The builder only wires: each mode's pieces live in their own packages, and the
// Runtime builds each mode's manager from them.
//
//   - Standard mode: package onboarding (the onboarding cluster, MCP access).
//   - kcp mode: package workspaces (tenancy over the APIExport's virtual workspace) for
//     the manager built here (kcp.go), and internal/kcpmode for the lifecycle: the
//     Supervisor follows spec.kcp and builds the manager whenever a configuration works.
//   - Platform-service mode: package platformservice.
//   - Every mode: internal/engine (the reconcile loop, the singleton rule), workload
//     (workload clusters), internal/sweep (orphaned requests).
//   - Operations: internal/ops serves one metrics endpoint and one pair of probes per
//     process, covering every mode (docs/design/observability.md). The standard-mode
//     manager serves them when it runs; a kcp-only process serves them itself, since
//     kcp mode's manager is replaced whenever spec.kcp changes. Readiness includes kcp
//     mode's connection to the virtual workspace when this process leads kcp mode.
package builder
