// Package builder assembles a service provider runtime from what a provider declares:
// its Service API type, its ProviderConfig type, whether it needs a workload cluster,
// optionally its kcp API surface, and its Reconciler.
//
//	rt, err := builder.ServiceProvider[*v1alpha1.Widget]("widgets", scheme).
//		For(&v1alpha1.Widget{}).
//		WithProviderConfig(&v1alpha1.ProviderConfig{}).
//		WorkloadCluster(true, workload.Permissions{Rules: ...}).
//		Complete(&widgetProvider{})
//	...
//	err = rt.Start(ctx, builder.Options{Platform: platformCfg, Onboarding: onboardingCfg})
//
// The Runtime runs one multicluster manager per mode in the same process, each with its
// own leader election ID, all driving the same engine.
package builder
