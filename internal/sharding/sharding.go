package sharding

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// Options configure a replica's share of the workspaces.
type Options struct {
	// Client reaches the platform cluster, uncached (a Lease read from a lagging cache
	// is a refused renewal, which the coordinator takes for a lost fence), with a rate
	// limit of its own: renewals must not queue behind the reconciles' requests. The
	// Leases this replica holds are read from its own last write of them instead
	// (heldLeases): one request per renewal.
	Client client.Client
	// Namespace holds the membership and fencing Leases: the provider's namespace.
	Namespace string
	// Name prefixes the Leases ("<name>-replica-<replica>", "<name>-ws-<workspace>").
	Name string
	// Replica is this replica's identity, unique among the running replicas.
	Replica string
	// LeaseDuration is both how long a silent replica stays a member and how long its
	// fence on a workspace holds: a killed replica's workspaces move after about
	// that long. Renewals happen every 5/8 of it (docs/design/replicas.md, Timings).
	LeaseDuration time.Duration
	// Shards, when set, are divided first: each replica watches and serves the
	// workspaces of its own kcp shards only, and the replicas of one shard share its
	// workspaces. Without it every replica watches every workspace.
	Shards Shards
	// Probe is the RetryPeriod: the members are listed, and ownership re-decided,
	// every half of it.
	Probe time.Duration
	// Provider labels the metrics.
	Provider string
	Log      logr.Logger
}

// Shards are the kcp shards the replicas divide, each known by the URL of its
// virtual workspace (kcpprovider.Provider).
type Shards interface {
	// Published returns the virtual workspace URLs of the endpoint slice.
	Published() []string
	// ShardOf returns the virtual workspace of a bound workspace.
	ShardOf(workspace string) (string, bool)
	// Reassess applies a change of ServesShard's answers.
	Reassess()
}

// Replicas is this replica's view of the replicas sharing kcp mode's workspaces.
type Replicas struct {
	registry *registry
	coord    *coordinator
	hrw      sharder.Sharder
	shards   Shards
	groups   groups
	provider string
}

// New returns the replica's coordinator and view; nothing runs until the manager
// given Coordinator starts.
func New(o Options) *Replicas {
	log := o.Log.WithName("sharding").WithValues("replica", o.Replica)
	r := &Replicas{hrw: sharder.NewHRW(), shards: o.Shards, provider: o.Provider}
	changed := func() {}
	if o.Shards != nil {
		changed = o.Shards.Reassess
	}
	// Renewals every 5/8 of the duration (5 s of the default 8 s): the duration bounds
	// failover, the renewal period sets the writes at steady state, one per Lease and
	// period, as many as with the 10 s lease renewed every 5 s before; a renewal may
	// come 3/8 of the duration (3 s) late before a fence lapses.
	renew := o.LeaseDuration * 5 / 8
	// A dead replica is noticed, and its workspaces decided on, at most half a
	// RetryPeriod after its Leases expire: the listing is one request, the decision
	// none unless a fence is to be taken.
	look := o.Probe / 2
	self := peerID(o.Replica)
	leases := newHeldLeases(o.Client, func(holder string) bool { return holder == self })
	r.registry = newRegistry(leases, o.Namespace, o.Name+"-replica", o.Replica, o.LeaseDuration, renew, look, log,
		func(n int) { metrics.KCPReplicasSeen(o.Provider, n) }, changed)
	lib := sharded.New(leases, log,
		sharded.WithPeerRegistry(r.registry),
		sharded.WithSharder(shardSharder{r}),
		sharded.WithShardLease(o.Namespace, o.Name+"-ws"),
		sharded.WithPerClusterLease(true),
		sharded.WithLeaseTimings(o.LeaseDuration, renew, look),
		sharded.WithSynchronizationIntervals(look, 3*o.Probe),
	)
	r.coord = newCoordinator(lib, func(workspace string) bool {
		return shardSharder{r}.ShouldOwn(workspace, r.registry.Snapshot(), r.registry.Self())
	}, log)
	return r
}

// ServesShard says whether this replica watches and serves the workspaces of the
// kcp shard whose virtual workspace is url: not before the registry has settled, so
// that replicas starting together do not each take every shard first.
func (r *Replicas) ServesShard(url string) bool {
	if r.shards == nil {
		return true
	}
	if !r.registry.settled() {
		return false
	}
	return slices.ContainsFunc(r.groups.of(url, r.shards.Published(), r.registry.Snapshot()), r.isSelf)
}

func (r *Replicas) isSelf(p sharder.PeerInfo) bool { return p.ID == r.registry.Self().ID }

// shardGroup returns the replicas among peers that serve the shard of url, of the
// shards urls: with at least as many replicas as shards, replica j (in the order of
// their IDs) serves shard j mod len(urls) (in the order of their URLs), so every
// shard has replicas and their numbers differ by one at most; with fewer, shard i
// is served by replica i mod len(peers) alone. Every replica computes the same
// answer from the same members.
func shardGroup(url string, urls []string, peers []sharder.PeerInfo) []sharder.PeerInfo {
	urls = slices.Sorted(slices.Values(urls))
	i := slices.Index(urls, url)
	if i < 0 || len(peers) == 0 {
		return nil
	}
	peers = slices.SortedFunc(slices.Values(peers), func(a, b sharder.PeerInfo) int { return strings.Compare(a.ID, b.ID) })
	if len(peers) < len(urls) {
		return peers[i%len(peers) : i%len(peers)+1]
	}
	var group []sharder.PeerInfo
	for j, p := range peers {
		if j%len(urls) == i {
			group = append(group, p)
		}
	}
	return group
}

// shardSharder is the coordinator's sharder when the shards are divided: a
// workspace belongs to the replicas of its shard, and among them to the one the
// library's rendezvous hash names.
type shardSharder struct{ r *Replicas }

func (s shardSharder) ShouldOwn(workspace string, peers []sharder.PeerInfo, self sharder.PeerInfo) bool {
	if s.r.shards == nil {
		return s.r.hrw.ShouldOwn(workspace, peers, self)
	}
	url, ok := s.r.shards.ShardOf(workspace)
	if !ok || !s.r.registry.settled() {
		return false
	}
	group := s.r.groups.of(url, s.r.shards.Published(), peers)
	if !slices.ContainsFunc(group, func(p sharder.PeerInfo) bool { return p.ID == self.ID }) {
		return false
	}
	// Alone in its shard's group (as many replicas as shards), a replica owns every
	// workspace of the shard; the rendezvous hash would name it too.
	return len(group) == 1 || s.r.hrw.ShouldOwn(workspace, group, self)
}

// groups remembers the group of replicas of each shard (shardGroup) for the shards
// and members it was computed from. The coordinator asks the sharder about every
// engaged workspace on every decision, and it decides once more for every workspace
// engaged: a replica taking over a dead one's shard of 250 workspaces made 250
// decisions over 500 workspaces each, sorting the shards and the members anew for
// every verdict, besides reading the workspace's binding (kcpprovider's isReady).
// Under the coordinator's lock, on CPUs shared with the servers, those decisions held
// back for about 2 s the one that takes the dead replica's fences as they expire
// (docs/design/replicas.md, "Traced on 2026-12-04 18:41").
type groups struct {
	mu    sync.Mutex
	urls  []string
	peers []sharder.PeerInfo
	byURL map[string][]sharder.PeerInfo
}

// of returns shardGroup(url, urls, peers); the slice returned is shared, read it only.
func (g *groups) of(url string, urls []string, peers []sharder.PeerInfo) []sharder.PeerInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byURL == nil || !slices.Equal(g.urls, urls) || !slices.Equal(g.peers, peers) {
		g.urls, g.peers = slices.Clone(urls), slices.Clone(peers)
		g.byURL = map[string][]sharder.PeerInfo{}
	}
	group, ok := g.byURL[url]
	if !ok {
		group = shardGroup(url, urls, peers)
		g.byURL[url] = group
	}
	return group
}

// Coordinator is what kcp mode's manager engages workspaces through
// (mcmanager.WithCoordinator).
func (r *Replicas) Coordinator() mcmanager.Coordinator { return r.coord }

// Self is this replica's identity as the other replicas see it.
func (r *Replicas) Self() string { return r.registry.Self().ID }

// Peers are the identities of the live replicas this replica knows of, itself
// included.
func (r *Replicas) Peers() []string {
	var ids []string
	for _, p := range r.registry.Snapshot() {
		ids = append(ids, p.ID)
	}
	return ids
}

// Responsible says whether this replica is the one to act for the workspace where
// no engagement decides it (the orphan sweep): for a bound workspace the replica that
// serves it, which alone sees its objects when the shards are divided; for one that
// is gone the one the rendezvous hash names among all live replicas.
func (r *Replicas) Responsible(workspace string) bool {
	peers, self := r.registry.Snapshot(), r.registry.Self()
	if r.shards != nil {
		if _, bound := r.shards.ShardOf(workspace); bound {
			return shardSharder{r}.ShouldOwn(workspace, peers, self)
		}
	}
	return r.hrw.ShouldOwn(workspace, peers, self)
}

// Ownership is a manager runnable that the coordinator engages like the engine, for
// the workspaces this replica serves: it counts them for the metrics.
func (r *Replicas) Ownership() mcmanager.Runnable { return ownership{provider: r.provider} }

type ownership struct{ provider string }

func (o ownership) Engage(ctx context.Context, _ multicluster.ClusterName, _ ctrlcluster.Cluster) error {
	metrics.KCPWorkspaceOwnership(o.provider, true)
	context.AfterFunc(ctx, func() { metrics.KCPWorkspaceOwnership(o.provider, false) })
	return nil
}

func (ownership) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Owner returns the replica, of the named replicas, that serves workspace when
// they all serve one kcp shard: the one the rendezvous hash names, as each replica
// decides it for itself. Tests use it to know each replica's share in advance.
func Owner(workspace string, replicas ...string) string {
	peers := make([]sharder.PeerInfo, len(replicas))
	for i, r := range replicas {
		peers[i] = sharder.PeerInfo{ID: peerID(r), Weight: 1}
	}
	hrw := sharder.NewHRW()
	for i, p := range peers {
		if hrw.ShouldOwn(workspace, peers, p) {
			return replicas[i]
		}
	}
	return ""
}
