// Package sharding spreads kcp mode's workspaces over the runtime's replicas.
//
// The replicas divide kcp's shards first (one virtual workspace per shard): each
// replica watches and serves the workspaces of its own shards only, so that its watch
// caches and per-workspace clusters hold its share, not every workspace; the
// replicas of one shard (when there are more replicas than shards) share its
// workspaces by rendezvous hashing (multicluster-runtime's sharder).
//
// What keeps two replicas from serving one workspace is per replica, not per
// workspace, so that its cost does not grow with the workspaces:
//
//   - membership (membership.go): one Lease per replica in the provider's namespace,
//     renewed every half of the renewal deadline; a replica whose renewals fail past
//     the deadline stops serving, and the others count it out only a lease duration
//     after they last saw it renew, measured on their own clocks;
//   - the coordinator (coordinator.go), multicluster-runtime's Coordinator interface:
//     a replica publishes in its Lease the view (members and shards) it serves by, once
//     it has stopped and drained everything outside its share of that view, and starts
//     a workspace only when every live member publishes the same view
//     (docs/design/replicas.md has the argument);
//   - the division of the shards among the replicas (ServesShard), which the
//     coordinator and the cluster provider both follow;
//   - the replica's answer to "is this workspace mine to clean up after?" for work
//     that has no engaged workspace to hang on (the orphan sweep of a workspace that
//     is gone);
//   - metrics of the workspaces a replica owns and of ownership changes.
package sharding
