// Package handover removes what a provider's old binary (on opencontrolplane-runtime)
// leaves behind once this runtime has taken over: its onboarding requests, which
// grant the onboarding cluster to a binary that no longer runs. It waits until no pod
// of the old binary can run any more, because an old pod that restarts during the
// rollout orders them again, and one that still runs needs them.
//
// The declaration is package migration's; docs/design/migration-plan.md says why.
package handover
