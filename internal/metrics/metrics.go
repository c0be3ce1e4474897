package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Namespace prefixes every metric of the runtime.
const Namespace = "serviceprovider"

// Results of a reconcile (label `result` of ReconcilesTotal).
const (
	// ResultReady: the provider finished; the object is Ready.
	ResultReady = "ready"
	// ResultProgressing: the provider (installing or deleting) is not done yet.
	ResultProgressing = "progressing"
	// ResultWaiting: the object waits for something outside the provider: access,
	// a ProviderConfig, the singleton rule, a permission claim.
	ResultWaiting = "waiting"
	// ResultError: the reconcile failed and is retried with backoff.
	ResultError = "error"
	// ResultReleased: deletion finished and the finalizer was removed.
	ResultReleased = "released"
	// ResultIgnored: the operation annotation says ignore.
	ResultIgnored = "ignored"
	// ResultSkipped: the object or its workspace was gone by the time of the reconcile.
	ResultSkipped = "skipped"
)

// Kinds of cluster access (label `cluster`).
const (
	// ClusterEndUser is the tenant's end-user cluster (MCP, or kcp workspace).
	ClusterEndUser = "enduser"
	// ClusterWorkload is the shared workload cluster.
	ClusterWorkload = "workload"
)

var (
	// ReconcilesTotal counts reconciles of Service objects by mode and result.
	ReconcilesTotal = counter("engine", "reconciles_total",
		"Reconciles of Service objects, by mode and result (ready, progressing, waiting, error, released, ignored, skipped).",
		"provider", "mode", "result")

	// ReconcileDuration is how long a reconcile of a Service object took.
	ReconcileDuration = histogram("engine", "reconcile_duration_seconds",
		"Duration of reconciles of Service objects, including access resolution, the provider call and the status write.",
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		"provider", "mode")

	// ProviderPanicsTotal counts panics of the provider's methods, recovered by the engine.
	ProviderPanicsTotal = counter("engine", "provider_panics_total",
		"Panics of the provider's CreateOrUpdate and Delete, recovered by the runtime, by method.",
		"provider", "mode", "method")

	// EventsTotal counts the events emitted on Service objects.
	EventsTotal = counter("engine", "events_total",
		"Events emitted on Service objects (on transitions only), by type and reason.",
		"provider", "mode", "type", "reason")

	// SingletonConflictsTotal counts objects rejected because their workspace already
	// has an active one.
	SingletonConflictsTotal = counter("engine", "singleton_conflicts_total",
		"Service objects rejected because their workspace already has an active one (counted when an object enters that state).",
		"provider", "mode")

	// AccessGrantDuration is the time from the first reconcile that waited for an
	// access to the reconcile that found it granted.
	AccessGrantDuration = histogram("access", "grant_duration_seconds",
		"Time from requesting cluster access (the object started waiting for it) to finding it granted, by cluster kind.",
		[]float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		"provider", "mode", "cluster")

	// ProviderConfigGeneration is the metadata.generation of the ProviderConfig the
	// last reconcile used.
	ProviderConfigGeneration = gauge("providerconfig", "generation",
		"metadata.generation of the ProviderConfig the last reconcile of each mode loaded.",
		"provider", "mode")

	// ProviderConfigValid says whether the last reconcile found the ProviderConfig
	// present and valid.
	ProviderConfigValid = gauge("providerconfig", "valid",
		"1 when the last reconcile of each mode found the ProviderConfig present and valid, else 0.",
		"provider", "mode")

	// TokenRequestsTotal counts TokenRequests for workload ServiceAccounts in tenant
	// workspaces.
	TokenRequestsTotal = counter("kcp", "token_requests_total",
		"TokenRequests for the workload ServiceAccount of tenant workspaces, by kind (new: the workspace had no token; renewal: the cached one reached 80 % of its lifetime or its account changed) and result.",
		"provider", "kind", "result")

	// RuntimeTokenRefreshesTotal counts refreshes of the runtime's own direct-call
	// token in its provider workspace.
	RuntimeTokenRefreshesTotal = counter("kcp", "runtime_token_refreshes_total",
		"Refreshes of the runtime's own direct-call token (a token of its ServiceAccount in the provider workspace), by result.",
		"provider", "result")

	// RuntimeTokenExpiry is when the runtime's current direct-call token expires.
	RuntimeTokenExpiry = gauge("kcp", "runtime_token_expiry_timestamp_seconds",
		"Unix time at which the runtime's current direct-call token expires.",
		"provider")

	// APIExportProvisionsTotal counts provisioning runs of the APIExport.
	APIExportProvisionsTotal = counter("kcp", "apiexport_provisions_total",
		"Provisioning runs of the provider's APIResourceSchemas and APIExport (one per kcp mode start), by result.",
		"provider", "result")

	// KCPWorkspacesOwned is how many bound workspaces this replica serves: all of them
	// with one replica, its share with several (internal/sharding).
	KCPWorkspacesOwned = gauge("kcp", "workspaces_owned",
		"Bound workspaces this replica serves in kcp mode.",
		"provider")

	// KCPOwnershipChangesTotal counts workspaces this replica started or stopped
	// serving: a replica joining or leaving, a workspace binding or unbinding.
	KCPOwnershipChangesTotal = counter("kcp", "workspace_ownership_changes_total",
		"Workspaces this replica started (kind gained) or stopped (kind released) serving in kcp mode, after a rebalance among replicas or a binding change.",
		"provider", "kind")

	// KCPVirtualWorkspacesGauge is how many virtual workspaces (one per kcp shard with
	// a binding) the APIExportEndpointSlice lists, how many of them kcp mode watches
	// (a difference that lasts means tenants on a shard are not served) and how many
	// of those this replica serves (replicas divide the shards).
	KCPVirtualWorkspacesGauge = gauge("kcp", "virtual_workspaces",
		"Virtual workspaces of kcp mode's APIExport: state published (listed in the APIExportEndpointSlice), watched (by this process) and served (their workspaces served by this replica).",
		"provider", "state")

	// KCPReplicas is how many replicas this replica sees sharing kcp mode's workspaces.
	KCPReplicas = gauge("kcp", "replicas",
		"Live replicas sharing kcp mode's workspaces, as this replica last saw them (itself included).",
		"provider")
)

// Label values of results.
const (
	success = "success"
	failure = "error"
)

func resultOf(err error) string {
	if err != nil {
		return failure
	}
	return success
}

func init() {
	ctrlmetrics.Registry.MustRegister(state)
}

// counter, gauge and histogram make a metric of the runtime and register it with
// controller-runtime's registry, which the manager serves.
func counter(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	ctrlmetrics.Registry.MustRegister(c)
	return c
}

func gauge(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	ctrlmetrics.Registry.MustRegister(g)
	return g
}

func histogram(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets}, labels)
	ctrlmetrics.Registry.MustRegister(h)
	return h
}

// TokenObserver returns the tokens.Options.Observe hook of a provider: it counts
// TokenRequests by kind and result.
func TokenObserver(provider string) func(renewal bool, err error) {
	return func(renewal bool, err error) {
		kind := "new"
		if renewal {
			kind = "renewal"
		}
		TokenRequestsTotal.WithLabelValues(provider, kind, resultOf(err)).Inc()
	}
}

// RuntimeTokenRefreshed records a refresh of the runtime's own token; expires is
// ignored on failure.
func RuntimeTokenRefreshed(provider string, expires time.Time, err error) {
	RuntimeTokenRefreshesTotal.WithLabelValues(provider, resultOf(err)).Inc()
	if err == nil {
		RuntimeTokenExpiry.WithLabelValues(provider).Set(float64(expires.Unix()))
	}
}

// APIExportProvisioned records a provisioning run.
func APIExportProvisioned(provider string, err error) {
	APIExportProvisionsTotal.WithLabelValues(provider, resultOf(err)).Inc()
}

// KCPWorkspaceOwnership records that this replica started (gained) or stopped serving
// a workspace.
func KCPWorkspaceOwnership(provider string, gained bool) {
	kind, delta := "released", -1.0
	if gained {
		kind, delta = "gained", 1
	}
	KCPOwnershipChangesTotal.WithLabelValues(provider, kind).Inc()
	KCPWorkspacesOwned.WithLabelValues(provider).Add(delta)
}

// KCPReplicasSeen records how many live replicas this replica sees.
func KCPReplicasSeen(provider string, n int) {
	KCPReplicas.WithLabelValues(provider).Set(float64(n))
}

// KCPVirtualWorkspaces records how many virtual workspaces the endpoint slice lists,
// how many kcp mode watches and how many of those it serves (with replicas dividing
// the shards, the others are watched for their APIBindings only).
func KCPVirtualWorkspaces(provider string, published, watched, served int) {
	KCPVirtualWorkspacesGauge.WithLabelValues(provider, "published").Set(float64(published))
	KCPVirtualWorkspacesGauge.WithLabelValues(provider, "watched").Set(float64(watched))
	KCPVirtualWorkspacesGauge.WithLabelValues(provider, "served").Set(float64(served))
}
