package sharding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// Options configure a replica's share of the workspaces.
type Options struct {
	// Client reaches the platform cluster, uncached (a membership listing must be
	// current), with a rate limit of its own: renewals must not queue behind the
	// reconciles' requests. This replica's Lease is read from its own last write of it
	// instead (heldLeases): one request per renewal.
	Client client.Client
	// Namespace holds the membership Leases: the provider's namespace.
	Namespace string
	// Name prefixes the Leases ("<name>-replica-<replica>").
	Name string
	// Replica is this replica's identity, unique among the running replicas.
	Replica string
	// LeaseDuration is how long the others wait, after they last saw this replica
	// renew, before they count it out and take its workspaces.
	LeaseDuration time.Duration
	// RenewDeadline is how long after its last successful renewal a replica stops
	// serving; it must be shorter than LeaseDuration, and is 5/8 of it when not.
	// Renewals happen every half of it (docs/design/replicas.md, Timings).
	RenewDeadline time.Duration
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
	members  *membership
	coord    *coordinator
	hrw      sharder.Sharder
	shards   Shards
	groups   groups
	provider string
	// reassess asks the goroutine that calls Shards.Reassess to call it (once for any
	// number of asks while it runs): taking a shard over engages every workspace of
	// it, one after the other, which must not hold the membership's renewals.
	reassess chan struct{}
	// last are the members Reassess was last asked for, and whether they had settled.
	lastMu      sync.Mutex
	last        []sharder.PeerInfo
	lastSettled bool
}

// New returns the replica's coordinator and view; nothing runs until the manager
// given Coordinator starts.
func New(o Options) *Replicas {
	log := o.Log.WithName("sharding").WithValues("replica", o.Replica)
	r := &Replicas{hrw: sharder.NewHRW(), shards: o.Shards, provider: o.Provider, reassess: make(chan struct{}, 1)}
	deadline := o.RenewDeadline
	if deadline <= 0 || deadline >= o.LeaseDuration {
		deadline = o.LeaseDuration * 5 / 8
	}
	self := peerID(o.Replica)
	leases := newHeldLeases(o.Client, func(holder string) bool { return holder == self })
	r.members = newMembership(leases, membershipOptions{
		ns: o.Namespace, prefix: o.Name + "-replica", id: o.Replica,
		ttl: o.LeaseDuration, renewEvery: deadline / 2, deadline: deadline,
		// A dead replica is noticed, and its workspaces decided on, at most half a
		// RetryPeriod after the others count it out: the listing is one request.
		refresh: o.Probe / 2,
		log:     log,
		seen:    func(n int) { metrics.KCPReplicasSeen(o.Provider, n) },
		listed:  r.listed,
		lost:    func() { r.coord.lost() },
	})
	r.coord = newCoordinator(r.members, r.decision, log)
	if o.Shards != nil {
		r.coord.alongside = r.reassessing
	}
	return r
}

// listed follows every listing of the members: a decision, and a reassessment of the
// shards when the members changed or have just settled.
func (r *Replicas) listed() {
	r.coord.poke()
	peers, settled := r.members.Snapshot(), r.members.settled()
	r.lastMu.Lock()
	changed := settled != r.lastSettled || !slices.Equal(peers, r.last)
	r.last, r.lastSettled = peers, settled
	r.lastMu.Unlock()
	if changed && r.shards != nil {
		select {
		case r.reassess <- struct{}{}:
		default: // one is pending already, and it reads the members as they are then
		}
	}
}

// reassessing calls Shards.Reassess when asked until ctx ends.
func (r *Replicas) reassessing(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.reassess:
			r.shards.Reassess()
		}
	}
}

// decision is the view of the members and shards as they are now, and this replica's
// share of it. The view names the members and the shards' virtual workspaces: two
// replicas that name one view give every workspace to the same replica.
func (r *Replicas) decision() (string, func(string) bool) {
	peers := r.members.Snapshot()
	urls := r.shardURLs()
	h := sha256.New()
	for _, p := range peers {
		fmt.Fprintf(h, "peer %s\n", p.ID)
	}
	for _, u := range urls {
		fmt.Fprintf(h, "shard %s\n", u)
	}
	view := hex.EncodeToString(h.Sum(nil)[:8])
	self := r.members.Self()
	return view, func(workspace string) bool { return r.shouldOwn(workspace, urls, peers, self) }
}

// shardURLs are the virtual workspaces of the shards, sorted, as the views and the
// shard groups name them; none without Shards.
func (r *Replicas) shardURLs() []string {
	if r.shards == nil {
		return nil
	}
	return slices.Sorted(slices.Values(r.shards.Published()))
}

// ServesShard says whether this replica watches and serves the workspaces of the
// kcp shard whose virtual workspace is url: not before the registry has settled, so
// that replicas starting together do not each take every shard first.
func (r *Replicas) ServesShard(url string) bool {
	if r.shards == nil {
		return true
	}
	if !r.members.settled() {
		return false
	}
	return slices.ContainsFunc(r.groups.of(url, r.shardURLs(), r.members.Snapshot()), r.isSelf)
}

func (r *Replicas) isSelf(p sharder.PeerInfo) bool { return p.ID == r.members.Self().ID }

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

// shouldOwn says whether self serves workspace among peers, over the shards urls:
// when the shards are divided a workspace belongs to the replicas of its shard, and
// among them to the one the rendezvous hash names.
func (r *Replicas) shouldOwn(workspace string, urls []string, peers []sharder.PeerInfo, self sharder.PeerInfo) bool {
	if r.shards == nil {
		return r.hrw.ShouldOwn(workspace, peers, self)
	}
	url, ok := r.shards.ShardOf(workspace)
	if !ok || !r.members.settled() {
		return false
	}
	group := r.groups.of(url, urls, peers)
	if !slices.ContainsFunc(group, func(p sharder.PeerInfo) bool { return p.ID == self.ID }) {
		return false
	}
	// Alone in its shard's group (as many replicas as shards), a replica owns every
	// workspace of the shard; the rendezvous hash would name it too.
	return len(group) == 1 || r.hrw.ShouldOwn(workspace, group, self)
}

// groups remembers the group of replicas of each shard (shardGroup) for the shards
// and members it was computed from. The coordinator asks about every engaged
// workspace on every listing, every second: computed anew for every verdict, sorting
// the shards and the members, a replica that took over a dead one's shard of 250
// workspaces spent seconds of CPU shared with the servers on it (docs/design/replicas.md,
// "Traced on 2026-12-04 18:41").
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
func (r *Replicas) Self() string { return r.members.Self().ID }

// Peers are the identities of the live replicas this replica knows of, itself
// included.
func (r *Replicas) Peers() []string {
	var ids []string
	for _, p := range r.members.Snapshot() {
		ids = append(ids, p.ID)
	}
	return ids
}

// Responsible says whether this replica is the one to act for the workspace where
// no engagement decides it (the orphan sweep): for a bound workspace the replica that
// serves it, which alone sees its objects when the shards are divided; for one that
// is gone the one the rendezvous hash names among all live replicas.
func (r *Replicas) Responsible(workspace string) bool {
	peers, self := r.members.Snapshot(), r.members.Self()
	if r.shards != nil {
		if _, bound := r.shards.ShardOf(workspace); bound {
			return r.shouldOwn(workspace, r.shardURLs(), peers, self)
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
