// Package sharding spreads kcp mode's workspaces over the runtime's replicas.
//
// The replicas divide kcp's shards first (one virtual workspace per shard): each
// replica watches and serves the workspaces of its own shards only, so that its watch
// caches and per-workspace clusters hold its share, not every workspace; the
// replicas of one shard (when there are more replicas than shards) share its
// workspaces. The deciding parts within a shard are multicluster-runtime's sharded
// coordinator: its rendezvous-hash sharder names the replica that should serve a
// workspace, and a fencing Lease per workspace makes sure that at most one replica
// serves it at a time. This package adds what the coordinator leaves to its user:
//
//   - the peer registry (registry.go): one Lease per live replica in the provider's
//     namespace. The library's own registry expires a peer after a fixed 30 seconds;
//     this one expires it after the configured lease duration, so a killed replica's
//     workspaces move within that duration (docs/design/replicas.md);
//   - the division of the shards among the replicas (ServesShard), which the
//     coordinator's sharder and the cluster provider both follow;
//   - the replica's answer to "is this workspace mine to clean up after?" for work
//     that has no engaged workspace to hang on (the orphan sweep of a workspace that
//     is gone);
//   - metrics of the workspaces a replica owns and of ownership changes;
//   - a repair of the coordinator (coordinator.go): the library starts workspaces
//     under the context of the workspace whose engagement kicked the decision, so
//     they stopped when that one left; they are engaged again instead.
package sharding
