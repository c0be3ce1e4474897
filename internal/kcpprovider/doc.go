// Package kcpprovider is kcp mode's multicluster provider: it engages every workspace
// bound to the provider's APIExport, through the virtual workspace of each kcp shard
// that the APIExportEndpointSlice lists.
//
// It is built from the parts of kcp's multicluster-provider (wildcard caches, scoped
// clusters, per-workspace event recorders) and differs from that library's provider in
// one way: a virtual workspace that cannot be watched yet (kcp publishes a shard's URL a
// moment before it serves the export there), or a workspace that fails to engage, is
// retried with backoff until it works or leaves the slice, and what is not watched is
// reported (Unwatched, a metric, the Notify hook) instead of being dropped until the
// slice changes again. docs/design/virtual-workspace-retry.md has the evidence.
//
// With several replicas, each serves only the virtual workspaces Options.Serves
// names (package sharding divides them): of the others it watches the APIBindings
// alone, so that it knows which workspaces are bound where (ShardOf), and engages
// nothing.
package kcpprovider
