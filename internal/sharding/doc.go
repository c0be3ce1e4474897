// Package sharding spreads kcp mode's workspaces over the runtime's replicas.
//
// The deciding parts are multicluster-runtime's sharded coordinator: its
// rendezvous-hash sharder names the replica that should serve a workspace, and a
// fencing Lease per workspace makes sure that at most one replica serves it at a time.
// This package adds what the coordinator leaves to its user:
//
//   - the peer registry (registry.go): one Lease per live replica in the provider's
//     namespace. The library's own registry expires a peer after a fixed 30 seconds;
//     this one expires it after the configured lease duration, so a killed replica's
//     workspaces move within that duration (docs/design/replicas.md);
//   - the replica's answer to "is this workspace mine to clean up after?" for work
//     that has no engaged workspace to hang on (the orphan sweep of a workspace that
//     is gone): the same sharder over the same peers;
//   - metrics of the workspaces a replica owns and of ownership changes.
package sharding
