package sharding

import (
	"fmt"
	"slices"
	"testing"

	"github.com/go-logr/logr"
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

// fixedShards places workspace ws-<i> on shard i mod 2.
type fixedShards struct{}

var fixedURLs = []string{"https://shard-0/vw", "https://shard-1/vw"}

func (fixedShards) Published() []string { return slices.Clone(fixedURLs) }

func (fixedShards) ShardOf(ws string) (string, bool) {
	var i int
	if _, err := fmt.Sscanf(ws, "ws-%d", &i); err != nil {
		return "", false
	}
	return fixedURLs[i%2], true
}

func (fixedShards) Reassess() {}

// BenchmarkShouldOwn is one ownership decision of the coordinator's, which it takes
// for every engaged workspace on every pass: 2 replicas over 2 shards.
func BenchmarkShouldOwn(b *testing.B) {
	r := New(Options{Namespace: "default", Name: "widgets-kcp", Replica: "a", LeaseDuration: kcpTestLease, Probe: kcpTestLease / 4,
		Shards: fixedShards{}, Log: logr.Discard()})
	r.registry.lists = settleListings
	peers := []sharder.PeerInfo{r.registry.Self(), {ID: peerID("b"), Weight: 1}}
	s := shardSharder{r}
	workspaces := make([]string, 500)
	for i := range workspaces {
		workspaces[i] = fmt.Sprintf("ws-%d", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.ShouldOwn(workspaces[i%len(workspaces)], peers, r.registry.Self())
	}
}

const kcpTestLease = 8e9
