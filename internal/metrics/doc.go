// Package metrics holds the runtime's Prometheus metrics. They are registered on
// controller-runtime's registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry),
// so they are served next to controller-runtime's own (workqueue, reconcile totals,
// REST client) on the process's metrics endpoint.
//
// Names follow `serviceprovider_<subsystem>_<name>_<unit>`; label values come from
// small closed sets plus the provider's name, never a workspace, tenant or object name
// (a series per workspace would cost the monitoring system more than the runtime).
//
// Two kinds of metrics live here:
//   - counters and histograms the code moves as things happen (reconciles, tokens,
//     provisioning, grants);
//   - gauges computed when scraped (objects by phase and reason, engaged workspaces,
//     leadership, kcp mode), from sources the engine and the builder register while
//     they run. Computing them from the informer caches at scrape time keeps them
//     exact across restarts, leader changes and deleted workspaces, which gauges
//     maintained by increments would not be.
//
// docs/metrics.md is the reference table; keep it in line with this package.
package metrics
