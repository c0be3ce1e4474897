package sharding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
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

const (
	// peerLabel marks a replica's membership Lease; its value is the Lease name prefix
	// of the provider's replicas, so that two providers in one namespace stay apart.
	peerLabel = "serviceprovider.open-control-plane.io/replica-of"
	// viewAnnotation on a membership Lease is the replica's promise: it serves no
	// workspace outside its share of the view it names, and starts none while the
	// annotation stands (docs/design/replicas.md, "Why two replicas never serve one
	// workspace").
	viewAnnotation = "serviceprovider.open-control-plane.io/serving-view"
)

// membership is this replica's Lease among the replicas' and what it reads of the
// others'. The Lease is renewed every renewEvery; a replica whose last successful
// renewal was sent more than deadline ago is no member in its own eyes (valid) and
// serves nothing, well before the others count it out: they do so only when a listing
// they sent a lease duration after they first saw its current renewal still shows
// that renewal. Both sides measure on their own clock, from moments that bracket the
// write, so no two clocks need to agree.
type membership struct {
	c      client.Client
	ns     string
	prefix string
	self   sharder.PeerInfo
	ttl    time.Duration
	// renewEvery is how often this replica's Lease is renewed, deadline how long
	// after the last successful renewal it counts as a member itself, refresh how often
	// the members are listed.
	renewEvery, deadline, refresh time.Duration
	log                           logr.Logger
	// seen is told the number of live peers after each listing; listed is called after
	// every listing, lost when this replica's renewal deadline passes.
	seen   func(int)
	listed func()
	lost   func()
	// relist asks for a listing before the next refresh (after this replica
	// published a view, so that it learns of the others' soon).
	relist chan struct{}

	// writeMu orders this replica's writes of its Lease (renewals and published
	// views): each builds on the last one's result.
	writeMu sync.Mutex

	mu sync.RWMutex
	// renewed is when the last successful renewal was sent (monotonic clock).
	renewed time.Time
	// published is the view this replica's Lease names (viewAnnotation) after its
	// last successful write.
	published string
	peers     []sharder.PeerInfo
	// views are the views the live peers' Leases name, by peer ID.
	views map[string]string
	// observed is, by peer ID, the resource version of its Lease in the listings and
	// when a listing first returned that version.
	observed map[string]observation
	// lists counts the successful listings: the membership has settled after the
	// second (settleListings).
	lists int
}

type observation struct {
	version string
	since   time.Time
}

// settleListings is how many listings a replica waits for before it takes a share:
// replicas that start within one refresh of each other then see each other before
// either takes the whole.
const settleListings = 2

var _ peers.Registry = &membership{}

type membershipOptions struct {
	ns, prefix, id                     string
	ttl, renewEvery, deadline, refresh time.Duration
	log                                logr.Logger
	seen                               func(int)
	listed, lost                       func()
}

func newMembership(c client.Client, o membershipOptions) *membership {
	self := sharder.PeerInfo{ID: peerID(o.id), Weight: 1}
	return &membership{c: c, ns: o.ns, prefix: o.prefix, self: self, ttl: o.ttl, renewEvery: o.renewEvery,
		deadline: o.deadline, refresh: min(o.refresh, o.renewEvery), log: o.log, seen: o.seen, listed: o.listed,
		lost: o.lost, relist: make(chan struct{}, 1), peers: []sharder.PeerInfo{self},
		views: map[string]string{}, observed: map[string]observation{}}
}

// settled says whether the members were listed often enough to take a share
// (settleListings).
func (m *membership) settled() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lists >= settleListings
}

// valid says whether this replica's last successful renewal is younger than the
// renewal deadline: only then may it serve anything.
func (m *membership) valid() bool {
	return m.left() > 0
}

func (m *membership) Self() sharder.PeerInfo { return m.self }

// Snapshot returns the live peers, this replica always among them.
func (m *membership) Snapshot() []sharder.PeerInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.peers
}

// agreed says whether every live peer's Lease names view, this replica's own
// included.
func (m *membership) agreed(view string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.published != view {
		return false
	}
	for _, p := range m.peers {
		if p.ID != m.self.ID && m.views[p.ID] != view {
			return false
		}
	}
	return true
}

// publishedView is the view this replica's Lease names.
func (m *membership) publishedView() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.published
}

// Run renews this replica's Lease and lists the members until ctx ends. It does not
// delete the Lease: leave does, once the replica serves nothing.
func (m *membership) Run(ctx context.Context) error {
	renew, refresh := time.NewTicker(m.renewEvery), time.NewTicker(m.refresh)
	defer renew.Stop()
	defer refresh.Stop()
	expiry := time.NewTimer(m.deadline)
	defer expiry.Stop()
	m.renew(ctx, expiry)
	for {
		if err := m.list(ctx); err != nil && ctx.Err() == nil {
			m.log.Error(err, "listing the replicas' membership Leases")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-renew.C:
			m.renew(ctx, expiry)
		case <-expiry.C:
			// A timer, not a check at the next tick: after a pause (SIGSTOP) it fires
			// before anything else this loop does.
			if left := m.left(); left > 0 {
				expiry.Reset(left) // renewed since, by a published view
			} else {
				if m.lost != nil {
					m.lost()
				}
				expiry.Reset(m.deadline)
			}
		case <-refresh.C:
		case <-m.relist:
		}
	}
}

func (m *membership) leaseName() string { return m.prefix + "-" + m.self.ID }

// renew renews this replica's Lease; a failure is logged and retried at the next
// renewal, before the deadline if the API server answers again.
func (m *membership) renew(ctx context.Context, expiry *time.Timer) {
	if err := m.write(ctx, nil); err != nil && ctx.Err() == nil {
		m.log.Error(err, "renewing this replica's membership Lease")
		return
	}
	expiry.Reset(m.left())
}

// left is how long this replica stays valid without another renewal.
func (m *membership) left() time.Duration {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.renewed.IsZero() {
		return 0
	}
	return m.deadline - time.Since(m.renewed)
}

// publish writes view into this replica's Lease, with a renewal, and asks for a
// listing so that the others' views are read soon.
func (m *membership) publish(ctx context.Context, view string) error {
	if err := m.write(ctx, &view); err != nil {
		return err
	}
	select {
	case m.relist <- struct{}{}:
	default:
	}
	return nil
}

// write renews this replica's Lease, naming view if it is set (else the view it names
// already).
func (m *membership) write(ctx context.Context, view *string) error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	sent := time.Now()
	m.mu.RLock()
	lapsed := !m.renewed.IsZero() && sent.Sub(m.renewed) >= m.deadline
	want := m.published
	m.mu.RUnlock()
	if lapsed && m.lost != nil {
		// The deadline passed unnoticed (a paused process wakes with this renewal
		// and its expiry timer due at once): stop serving before counting as a
		// member again. lost only cancels; it does not wait.
		m.lost()
	}
	if view != nil {
		want = *view
	}
	now := metav1.NewMicroTime(sent)
	lease := &coordinationv1.Lease{}
	err := m.c.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: m.leaseName()}, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: m.leaseName(), Labels: map[string]string{peerLabel: m.prefix}},
			Spec:       coordinationv1.LeaseSpec{AcquireTime: &now},
		}
	case err != nil:
		return err
	}
	metav1.SetMetaDataAnnotation(&lease.ObjectMeta, viewAnnotation, want)
	lease.Spec.HolderIdentity = ptr.To(m.self.ID)
	lease.Spec.LeaseDurationSeconds = ptr.To(seconds(m.ttl))
	lease.Spec.RenewTime = &now
	if lease.ResourceVersion == "" {
		err = m.c.Create(ctx, lease)
	} else {
		err = m.c.Update(ctx, lease)
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.renewed, m.published = sent, want
	m.mu.Unlock()
	return nil
}

func (m *membership) list(ctx context.Context) error {
	sent := time.Now()
	list := &coordinationv1.LeaseList{}
	if err := m.c.List(ctx, list, client.InNamespace(m.ns), client.MatchingLabels{peerLabel: m.prefix}); err != nil {
		return err
	}
	got := time.Now()
	m.mu.Lock()
	live := []sharder.PeerInfo{m.self}
	views := map[string]string{}
	observed := map[string]observation{}
	for i := range list.Items {
		l := &list.Items[i]
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" || holder == m.self.ID {
			continue
		}
		o, ok := m.observed[holder]
		if !ok || o.version != l.ResourceVersion {
			// First seen now: the renewal was written before this listing returned.
			o = observation{version: l.ResourceVersion, since: got}
		}
		observed[holder] = o
		ttl := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
		if sent.Sub(o.since) > ttl {
			// This listing was sent more than the lease after the renewal it returns
			// was first seen: a replica that stopped renewing (killed, paused, cut
			// off), whose own deadline has passed.
			continue
		}
		live = append(live, sharder.PeerInfo{ID: holder, Weight: 1})
		views[holder] = l.Annotations[viewAnnotation]
	}
	slices.SortFunc(live, func(a, b sharder.PeerInfo) int { return strings.Compare(a.ID, b.ID) })
	m.peers, m.views, m.observed = live, views, observed
	m.lists++
	m.mu.Unlock()
	if m.seen != nil {
		m.seen(len(live))
	}
	if m.listed != nil {
		m.listed()
	}
	return nil
}

// leave deletes this replica's Lease, best effort: the replica serves nothing any
// more, and the others need not wait the lease duration to count it out.
func (m *membership) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: m.leaseName()}}
	if err := m.c.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
		m.log.Error(err, "deleting this replica's membership Lease; the others count it out after the lease duration")
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

func seconds(d time.Duration) int32 {
	s := int32(d / time.Second)
	return max(s, 1)
}
