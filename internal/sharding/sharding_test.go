package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/sharding"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	testTTL     = 3 * time.Second
	testRefresh = 200 * time.Millisecond
)

// platformClient starts a platform API server and returns a client of it.
func platformClient(t testing.TB) client.Client {
	platform := harness.StartAPIServer(t, harness.PurposePlatform)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return harness.NewClient(t, platform.Config, scheme)
}

// newTestReplica is a replica's view with the test's timings; shards may be nil.
func newTestReplica(c client.Client, name string, shards sharding.Shards) *sharding.Replicas {
	o := sharding.Options{Client: c, Namespace: "default", Name: "widgets-kcp", Replica: name,
		LeaseDuration: testTTL, Probe: testRefresh, Provider: "widgets", Log: testLog}
	if shards != nil {
		o.Shards = shards
	}
	return sharding.New(o)
}

// runReplica runs a replica's coordinator, which runs its membership; with no
// workspace engaged it decides nothing else.
func runReplica(ctx context.Context, r *sharding.Replicas) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Coordinator().Runnable().Start(ctx) }()
	return func() { cancel(); <-done }
}

// TestReplicasAgreeAndForgetTheDead runs three replicas' views on a real API server:
// they agree on one responsible replica per workspace; a replica that stops leaves at
// once; one that goes silent (killed) is dropped after the lease duration.
func TestReplicasAgreeAndForgetTheDead(t *testing.T) {
	ctx := t.Context()
	c := platformClient(t)
	newReplica := func(name string) *sharding.Replicas { return newTestReplica(c, name, nil) }
	run := func(r *sharding.Replicas) func() { return runReplica(ctx, r) }
	a, b := newReplica("a"), newReplica("b")
	stopA, stopB := run(a), run(b)
	defer stopA()
	defer stopB()
	// c joined once and then went silent, as a killed process does: its Lease is
	// what a replica writes, never renewed.
	now := metav1.NowMicro()
	if err := c.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "widgets-kcp-replica-c",
			Labels: map[string]string{"serviceprovider.open-control-plane.io/replica-of": "widgets-kcp-replica"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("c"), LeaseDurationSeconds: ptr.To(int32(testTTL / time.Second)), RenewTime: &now},
	}); err != nil {
		t.Fatal(err)
	}

	wantPeers := func(r *sharding.Replicas, want ...string) {
		t.Helper()
		harness.Eventually(ctx, t, 2*testTTL, fmt.Sprintf("%s sees %v", r.Self(), want), func(context.Context) error {
			got := r.Peers()
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("sees %v", got)
			}
			return nil
		})
	}
	wantPeers(a, a.Self(), b.Self(), "c")
	wantPeers(b, a.Self(), b.Self(), "c")

	// No workspace has two responsible replicas, and each of the three gets some.
	share := map[string]int{}
	for i := range 300 {
		ws := fmt.Sprintf("ws-%d", i)
		var who []string
		for _, r := range []*sharding.Replicas{a, b} {
			if r.Responsible(ws) {
				who = append(who, r.Self())
			}
		}
		if len(who) > 1 {
			t.Fatalf("workspace %s: responsible replicas %v, want one", ws, who)
		}
		if len(who) == 0 {
			who = append(who, "c")
		}
		share[who[0]]++
	}
	t.Logf("300 workspaces by responsible replica: %v", share)
	if len(share) != 3 {
		t.Errorf("shares %v: a replica is responsible for nothing", share)
	}
	for who, n := range share {
		if n < 60 {
			t.Errorf("replica %s is responsible for %d of 300 workspaces, want about 100 (shares %v)", who, n, share)
		}
	}

	// The silent replica is dropped once its Lease is ttl old.
	silent := time.Now()
	wantPeers(a, a.Self(), b.Self())
	if d := time.Since(silent); d > testTTL+time.Second {
		t.Errorf("the silent replica was dropped after %s, want within its lease (%s) and a refresh", d, testTTL)
	}

	// Owner, what tests check their workspaces' owners against, names the replica
	// that takes the workspace.
	for i := range 50 {
		ws := fmt.Sprintf("ws-%d", i)
		if got, want := sharding.Owner(ws, "a", "b") == "a", a.Responsible(ws); got != want {
			t.Errorf("%s: Owner says a is its owner: %v; a says it is responsible: %v", ws, got, want)
		}
	}

	// A replica that stops deletes its Lease: the others drop it without waiting.
	stopped := time.Now()
	stopB()
	wantPeers(a, a.Self())
	if d := time.Since(stopped); d > testTTL/2 {
		t.Errorf("the stopped replica was dropped after %s, want within a few refreshes (%s)", d, testRefresh)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "widgets-kcp-replica-" + b.Self()}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stopped replica's Lease: %v, want it deleted", err)
	}
	for i := range 50 {
		if ws := fmt.Sprintf("ws-%d", i); !a.Responsible(ws) {
			t.Fatalf("the last replica is not responsible for %s", ws)
		}
	}
}

// shards is a kcp of two shards as sharding.Shards sees it: workspace ws-<i> is
// bound on shard i mod 2.
type shards struct {
	mu         sync.Mutex
	reassessed int
}

var shardURLs = []string{"https://shard-0/vw", "https://shard-1/vw"}

func (*shards) Published() []string { return shardURLs }

func (*shards) ShardOf(ws string) (string, bool) {
	var i int
	if _, err := fmt.Sscanf(ws, "ws-%d", &i); err != nil {
		return "", false
	}
	return shardURLs[i%2], true
}

func (s *shards) Reassess() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reassessed++
}

func (s *shards) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reassessed
}

// TestReplicasDivideShards runs two replicas' views over a kcp of two shards: once
// they have settled each serves one shard, and is responsible for exactly the bound
// workspaces of it; the survivor of a stop serves both. Every change of the answer
// is announced (Reassess).
func TestReplicasDivideShards(t *testing.T) {
	ctx := t.Context()
	c := platformClient(t)
	sa, sb := &shards{}, &shards{}
	a, b := newTestReplica(c, "a", sa), newTestReplica(c, "b", sb)
	if a.ServesShard(shardURLs[0]) || a.ServesShard(shardURLs[1]) {
		t.Error("a replica that has not listed the others serves a shard")
	}
	stopA, stopB := runReplica(ctx, a), runReplica(ctx, b)
	defer stopA()
	defer stopB()

	served := func(r *sharding.Replicas) []string {
		var out []string
		for _, url := range shardURLs {
			if r.ServesShard(url) {
				out = append(out, url)
			}
		}
		return out
	}
	harness.Eventually(ctx, t, 2*testTTL, "each replica serves one shard of its own", func(context.Context) error {
		ga, gb := served(a), served(b)
		if len(ga) != 1 || len(gb) != 1 || ga[0] == gb[0] {
			return fmt.Errorf("a serves %v, b %v", ga, gb)
		}
		return nil
	})
	if sa.count() == 0 || sb.count() == 0 {
		t.Errorf("reassessed %d and %d times, want each replica told of its share", sa.count(), sb.count())
	}
	for i := range 20 {
		ws := fmt.Sprintf("ws-%d", i)
		url, _ := sa.ShardOf(ws)
		if got, want := a.Responsible(ws), a.ServesShard(url); got != want {
			t.Errorf("a responsible for %s (on %s): %v, want %v, as it serves that shard", ws, url, got, want)
		}
		if a.Responsible(ws) == b.Responsible(ws) {
			t.Errorf("%s: a responsible %v, b %v, want exactly one", ws, a.Responsible(ws), b.Responsible(ws))
		}
	}
	// A workspace bound nowhere (gone) still has one responsible replica.
	if a.Responsible("gone") == b.Responsible("gone") {
		t.Error("a workspace that is gone has no single responsible replica")
	}

	before := sa.count()
	stopB()
	harness.Eventually(ctx, t, 2*testTTL, "a serves both shards", func(context.Context) error {
		if got := served(a); len(got) != 2 {
			return fmt.Errorf("a serves %v", got)
		}
		return nil
	})
	if sa.count() == before {
		t.Error("a was not told that its share grew")
	}
}

// slowShards reassesses as slowly as taking over a shard of hundreds of workspaces
// does: until release is closed.
type slowShards struct {
	shards
	release chan struct{}
}

func (s *slowShards) Reassess() {
	s.shards.Reassess()
	<-s.release
}

// TestMembershipOutlivesASlowReassessment: while a replica reassesses its shards for
// twice the lease duration (engaging the workspaces of a shard it takes over), it
// keeps renewing its membership, so the other replica never counts it dead and
// takes its shard; its reassessment of the next change follows the slow one.
func TestMembershipOutlivesASlowReassessment(t *testing.T) {
	ctx := t.Context()
	c := platformClient(t)
	sa := &slowShards{release: make(chan struct{})}
	a, b := newTestReplica(c, "a", sa), newTestReplica(c, "b", &shards{})
	stopA, stopB := runReplica(ctx, a), runReplica(ctx, b)
	defer stopA()
	defer stopB()
	released := false
	release := func() {
		if !released {
			released = true
			close(sa.release)
		}
	}
	defer release()

	harness.Eventually(ctx, t, 2*testTTL, "b sees a", func(context.Context) error {
		if len(b.Peers()) != 2 {
			return fmt.Errorf("b sees %v", b.Peers())
		}
		return nil
	})
	harness.Eventually(ctx, t, 2*testTTL, "a reassesses", func(context.Context) error {
		if sa.count() == 0 {
			return fmt.Errorf("a has not reassessed")
		}
		return nil
	})
	// a is stuck in its reassessment for twice the lease duration; b must see it
	// alive all along.
	deadline := time.Now().Add(2 * testTTL)
	for time.Now().Before(deadline) {
		if got := b.Peers(); len(got) != 2 {
			t.Fatalf("b sees only %v while a reassesses: a's membership lapsed", got)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(testRefresh):
		}
	}
	before := sa.count()
	release()
	stopB()
	harness.Eventually(ctx, t, 2*testTTL, "a reassesses once b left", func(context.Context) error {
		if sa.count() <= before {
			return fmt.Errorf("a reassessed %d times, %d before b left", sa.count(), before)
		}
		return nil
	})
}

// BenchmarkResponsible is one ownership verdict of the sharder, the one the
// coordinator asks for every engaged workspace on every decision: 2 replicas over 2
// shards, settled on a real API server.
func BenchmarkResponsible(b *testing.B) {
	ctx := b.Context()
	c := platformClient(b)
	a, other := newTestReplica(c, "a", &shards{}), newTestReplica(c, "b", &shards{})
	stopA, stopB := runReplica(ctx, a), runReplica(ctx, other)
	defer stopA()
	defer stopB()
	harness.Eventually(ctx, b, 2*testTTL, "each replica serves one shard", func(context.Context) error {
		if !a.ServesShard(shardURLs[0]) && !a.ServesShard(shardURLs[1]) || len(a.Peers()) != 2 {
			return fmt.Errorf("a serves neither shard, or sees %v", a.Peers())
		}
		return nil
	})
	workspaces := make([]string, 500)
	for i := range workspaces {
		workspaces[i] = fmt.Sprintf("ws-%d", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.Responsible(workspaces[i%len(workspaces)])
	}
}

var testLog = logr.Discard()
