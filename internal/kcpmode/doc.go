// Package kcpmode runs kcp mode's lifecycle: the Supervisor follows the ProviderConfig's
// spec.kcp and keeps kcp mode in line with it, without ever restarting the process
// (docs/design/kcp-mode.md).
//
//   - Following spec.kcp (supervisor.go): kcp mode starts when spec.kcp appears, is
//     replaced when it or its kubeconfig Secret changes, and stops when it is removed.
//     A new configuration replaces the running one only once it works; until then the
//     configuration that last worked keeps serving.
//   - Reporting (status.go): why a configuration fails, as the ProviderConfig's KCPMode
//     condition and events, and the Secret watch that applies a fixed Secret at once.
//   - Credentials (credentials.go): virtual-workspace calls and direct calls use
//     different credentials; for a ServiceAccount identity the runtime mints and renews
//     its own second token.
//   - Health (checks.go): the liveness and readiness checks of kcp mode, including the
//     probe of the APIExport's virtual workspace, served by package ops.
//
// What kcp mode's manager runs (the shared watch, tenancy, engine) is not this
// package's concern: the builder hands the Supervisor a factory building it for a
// Connection that works.
package kcpmode
