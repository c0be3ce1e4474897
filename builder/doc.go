// Package builder assembles a service provider runtime from what a provider declares:
// its Service API type, its ProviderConfig type, whether it needs a workload cluster,
// optionally its kcp API surface, and its Reconciler. A provider binary usually hands
// the builder call to command.Main (as the provider cmd/kcp-serviceprovider-new writes
// does); a program of its own calls rt.Start(ctx, builder.Options{...}) on what
// Complete returns.
//
// The Runtime runs one multicluster manager per mode in the same process, each with its
// own leader election ID, all driving the same engine.
//
// The builder only wires; each mode's pieces live in their own packages: onboarding
// (standard mode), workspaces and internal/kcpmode (kcp mode), platformservice, and for
// every mode internal/engine, workload and internal/sweep. internal/ops serves one
// metrics endpoint and one pair of probes per process, covering every mode
// (docs/design/observability.md, docs/design/layout.md).
package builder
