// Package migration declares what a provider's binary on opencontrolplane-runtime
// named, so that this runtime takes over its tenants in place when a platform team
// swaps the ServiceProvider's image, and hands them back on a swap the other way.
//
// A provider moving over fills in a [FromOCR] from its old main.go and hands it to
// command.Provider.Migration (or builder.Options.Migration). The runtime then keeps the
// old binary's request names, labels, registration IDs, finalizer, ProviderConfig
// name and Ready reasons in standard mode, adopts the requests the old binary made,
// elects its leader on the old binary's lease, accepts the old binary's flags, and
// removes the old onboarding requests once the rollout is complete.
//
// Why each piece is needed, with the evidence from opencontrolplane-runtime and the
// real providers: docs/design/migration-plan.md. The steps for a platform team:
// docs/migrating-from-opencontrolplane-runtime.md.
package migration
