package sharding

import (
	"slices"
	"testing"

	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
)

// TestGroupsFollowMembersAndShards: the remembered groups are shardGroup's answer for
// the members and shards asked with, as they change: a member joins, one leaves, the
// endpoint slice publishes another shard.
func TestGroupsFollowMembersAndShards(t *testing.T) {
	peer := func(id string) sharder.PeerInfo { return sharder.PeerInfo{ID: id, Weight: 1} }
	two := []string{"https://shard-0/vw", "https://shard-1/vw"}
	three := append(slices.Clone(two), "https://shard-2/vw")
	var g groups
	for i, step := range []struct {
		urls  []string
		peers []sharder.PeerInfo
	}{
		{two, []sharder.PeerInfo{peer("a")}},
		{two, []sharder.PeerInfo{peer("a"), peer("b")}},
		{two, []sharder.PeerInfo{peer("a"), peer("b")}},
		{two, []sharder.PeerInfo{peer("b"), peer("c"), peer("a")}},
		{three, []sharder.PeerInfo{peer("b"), peer("c"), peer("a")}},
		{three, []sharder.PeerInfo{peer("c")}},
	} {
		for _, url := range step.urls {
			got, want := g.of(url, step.urls, step.peers), shardGroup(url, step.urls, step.peers)
			if !slices.Equal(got, want) {
				t.Errorf("step %d, %s: group %v, want %v", i, url, got, want)
			}
		}
	}
}
