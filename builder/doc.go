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
// Operations (ops.go, docs/design/observability.md): one metrics endpoint and one pair
// of probes per process, covering every mode. The standard-mode manager serves them
// when it runs; a kcp-only process serves them itself, since kcp mode's manager is
// replaced whenever spec.kcp changes. Readiness includes kcp mode's connection to the
// virtual workspace when this process leads kcp mode.
package builder
