package sharding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/peers"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"
)

// peerLabel marks a replica's membership Lease; its value is the Lease name prefix
// of the provider's replicas, so that two providers in one namespace stay apart.
const peerLabel = "serviceprovider.open-control-plane.io/replica-of"

// registry is a peers.Registry whose members expire after ttl: each replica renews a
// Lease of its own every renewEvery and reads the others' from one labelled list every
// refresh, so that it notices a dead member at most refresh after its Lease expired.
type registry struct {
	c      client.Client
	ns     string
	prefix string
	self   sharder.PeerInfo
	ttl    time.Duration
	// renewEvery is how often this replica's Lease is renewed; refresh how often the
	// members are listed.
	renewEvery, refresh time.Duration
	log                 logr.Logger
	// seen is told the number of live peers after each refresh; changed is called
	// when the members differ from the last listing's, and when the registry settles.
	seen    func(int)
	changed func()
	// kick asks the goroutine that calls changed to call it (once for any number of
	// kicks while it runs). changed reassesses the shards, which engages every
	// workspace of a shard taken over, one after the other: seconds for hundreds.
	// Called from the loop that renews this replica's Lease, it held the renewals
	// and the listings for that long, past the point where the others would count
	// this replica dead.
	kick chan struct{}

	mu    sync.RWMutex
	peers []sharder.PeerInfo
	// lists counts the successful listings: the registry has settled after the
	// second (settleListings).
	lists int
}

// settleListings is how many listings a replica waits for before it takes a share:
// replicas that start within one refresh of each other then see each other before
// either takes the whole.
const settleListings = 2

var _ peers.Registry = &registry{}

func newRegistry(c client.Client, ns, prefix, id string, ttl, renewEvery, refresh time.Duration, log logr.Logger, seen func(int), changed func()) *registry {
	self := sharder.PeerInfo{ID: peerID(id), Weight: 1}
	return &registry{c: c, ns: ns, prefix: prefix, self: self, ttl: ttl, renewEvery: renewEvery, refresh: min(refresh, renewEvery),
		log: log, seen: seen, changed: changed, kick: make(chan struct{}, 1), peers: []sharder.PeerInfo{self}}
}

// settled says whether the registry has listed the members often enough to take a
// share (settleListings).
func (r *registry) settled() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lists >= settleListings
}

func (r *registry) Self() sharder.PeerInfo { return r.self }

// Snapshot returns the live peers, this replica always among them.
func (r *registry) Snapshot() []sharder.PeerInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.peers
}

// Run renews this replica's Lease and refreshes the peers until ctx ends, then
// deletes the Lease, so that the others need not wait ttl to count a replica stopped
// on purpose out.
func (r *registry) Run(ctx context.Context) error {
	renew, refresh := time.NewTicker(r.renewEvery), time.NewTicker(r.refresh)
	defer renew.Stop()
	defer refresh.Stop()
	go r.tell(ctx)
	r.renew(ctx)
	for {
		if err := r.list(ctx); err != nil && ctx.Err() == nil {
			r.log.Error(err, "listing the replicas' membership Leases")
		}
		select {
		case <-ctx.Done():
			r.leave()
			return nil
		case <-renew.C:
			r.renew(ctx)
		case <-refresh.C:
		}
	}
}

func (r *registry) leaseName() string { return r.prefix + "-" + r.self.ID }

// renew renews this replica's Lease; a failure is logged and retried at the next
// renewal, well before the Lease expires.
func (r *registry) renew(ctx context.Context) {
	if err := r.renewOnce(ctx); err != nil && ctx.Err() == nil {
		r.log.Error(err, "renewing this replica's membership Lease")
	}
}

func (r *registry) renewOnce(ctx context.Context) error {
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{}
	err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.leaseName()}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.leaseName(), Labels: map[string]string{peerLabel: r.prefix}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(r.self.ID), LeaseDurationSeconds: ptr.To(seconds(r.ttl)),
				AcquireTime: &now, RenewTime: &now,
			},
		}
		return r.c.Create(ctx, lease)
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(r.self.ID)
	lease.Spec.LeaseDurationSeconds = ptr.To(seconds(r.ttl))
	lease.Spec.RenewTime = &now
	return r.c.Update(ctx, lease)
}

func (r *registry) list(ctx context.Context) error {
	list := &coordinationv1.LeaseList{}
	if err := r.c.List(ctx, list, client.InNamespace(r.ns), client.MatchingLabels{peerLabel: r.prefix}); err != nil {
		return err
	}
	now := time.Now()
	live := []sharder.PeerInfo{r.self}
	for i := range list.Items {
		l := &list.Items[i].Spec
		if l.HolderIdentity == nil || *l.HolderIdentity == r.self.ID || l.RenewTime == nil || l.LeaseDurationSeconds == nil {
			continue
		}
		if now.After(l.RenewTime.Add(time.Duration(*l.LeaseDurationSeconds) * time.Second)) {
			continue // a replica that stopped renewing: killed, or cut off
		}
		live = append(live, sharder.PeerInfo{ID: *l.HolderIdentity, Weight: 1})
	}
	r.mu.Lock()
	changed := !slices.EqualFunc(sortedIDs(r.peers), sortedIDs(live), func(a, b string) bool { return a == b })
	r.peers = live
	r.lists++
	changed = changed || r.lists == settleListings
	r.mu.Unlock()
	if r.seen != nil {
		r.seen(len(live))
	}
	if changed {
		select {
		case r.kick <- struct{}{}:
		default: // a call is pending already, and it reads the members as they are then
		}
	}
	return nil
}

// tell calls changed for the kicks until ctx ends.
func (r *registry) tell(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			if r.changed != nil {
				r.changed()
			}
		}
	}
}

// leave deletes this replica's Lease, best effort: the process is stopping.
func (r *registry) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.leaseName()}}
	if err := r.c.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		r.log.Error(err, "deleting this replica's membership Lease; the others notice its absence after the lease duration")
	}
}

// peerID is a replica's identity among the peers: its name, and a hash of it. The
// sharder hashes "<workspace>|<peer>" with 64-bit FNV-1a, which spreads keys that
// differ only in their last bytes poorly: replicas "a", "b" and "c" got 50, 25 and 25 %
// of the workspaces. Sixteen hex digits of SHA-256 at the end even the shares out
// (docs/design/replicas.md).
func peerID(replica string) string {
	sum := sha256.Sum256([]byte(replica))
	return sanitize.DNS1123(replica) + "-" + hex.EncodeToString(sum[:8])
}

func sortedIDs(peers []sharder.PeerInfo) []string {
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	slices.Sort(ids)
	return ids
}

func seconds(d time.Duration) int32 {
	s := int32(d / time.Second)
	return max(s, 1)
}
