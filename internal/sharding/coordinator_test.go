package sharding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
)

// TestWorkspacesOutliveTheOneThatKickedTheirStart: on a real API server, x and y are
// engaged while this replica may not own them yet; z's engagement then kicks the
// decision that starts all three, under z's context. When z leaves, x and y must
// stay served (the library alone stops them and never starts them again) and keep
// their fences; when x leaves in turn, it stops and its fence is released.
func TestWorkspacesOutliveTheOneThatKickedTheirStart(t *testing.T) {
	ctx := t.Context()
	c := harness.NewClient(t, harness.StartAPIServer(t, harness.PurposePlatform).Config)

	gate := &gatedSharder{asked: map[string]int{}}
	self := sharder.PeerInfo{ID: "me", Weight: 1}
	// No Runnable runs: the library's only decisions are those its Engage kicks.
	lib := sharded.New(c, logr.Discard(),
		sharded.WithPeerRegistry(onePeer{self}),
		sharded.WithSharder(gate),
		sharded.WithShardLease("default", "widgets-kcp-ws"),
		sharded.WithPerClusterLease(true),
		sharded.WithLeaseTimings(8*time.Second, 5*time.Second, 100*time.Millisecond),
		sharded.WithSynchronizationIntervals(time.Hour, time.Hour),
	)
	coord := newCoordinator(lib, func(ws string) bool { return gate.ShouldOwn(ws, nil, self) }, logr.Discard())
	served := &startRecorder{starts: map[multicluster.ClusterName][]context.Context{}}
	coord.AddAware(served)

	engage := func(name string) context.CancelFunc {
		t.Helper()
		wctx, leave := context.WithCancel(ctx)
		if err := coord.Engage(wctx, multicluster.ClusterName(name), nil); err != nil {
			t.Fatal(err)
		}
		return leave
	}
	eventually := func(what string, cond func() error) {
		t.Helper()
		harness.Eventually(ctx, t, 10*time.Second, what, func(context.Context) error { return cond() })
	}
	leaveX := engage("x")
	defer leaveX()
	eventually("x decided on", func() error { return gate.askedAtLeast("x", 1) })
	leaveY := engage("y")
	defer leaveY()
	// y's decision asks about x too: after it no decision is left to start x or y.
	eventually("y decided on", func() error {
		return errorsOf(gate.askedAtLeast("x", 2), gate.askedAtLeast("y", 1))
	})
	gate.open()
	leaveZ := engage("z")
	eventually("x, y and z served", func() error { return served.serving("x", "y", "z") })

	leaveZ()
	eventually("z stopped, x and y served again", func() error {
		if served.serving("z") == nil {
			return fmt.Errorf("z is still served")
		}
		return served.serving("x", "y")
	})
	for _, ws := range []string{"x", "y"} {
		if n := served.count(ws); n < 2 {
			t.Errorf("%s started %d times: it was not stopped with z, so this test did not reproduce the library's decision", ws, n)
		}
		if h := fenceHolder(ctx, t, c, ws); h != "me" {
			t.Errorf("the fence of %s is held by %q, want this replica", ws, h)
		}
	}

	leaveX()
	eventually("x stopped and its fence released, y served", func() error {
		if served.serving("x") == nil {
			return fmt.Errorf("x is still served")
		}
		if h := fenceHolder(ctx, t, c, "x"); h != "" {
			return fmt.Errorf("the fence of x is held by %q", h)
		}
		return served.serving("y")
	})
}

func fenceHolder(ctx context.Context, t *testing.T, c client.Client, ws string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "widgets-kcp-ws-" + ws}, l); err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// gatedSharder owns nothing until opened, and counts what it was asked.
type gatedSharder struct {
	mu     sync.Mutex
	isOpen bool
	asked  map[string]int
}

func (g *gatedSharder) ShouldOwn(ws string, _ []sharder.PeerInfo, _ sharder.PeerInfo) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked[ws]++
	return g.isOpen
}

func (g *gatedSharder) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.isOpen = true
}

func (g *gatedSharder) askedAtLeast(ws string, n int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asked[ws] < n {
		return fmt.Errorf("asked about %s %d times", ws, g.asked[ws])
	}
	return nil
}

// onePeer is a membership of this replica alone.
type onePeer struct{ self sharder.PeerInfo }

func (p onePeer) Self() sharder.PeerInfo       { return p.self }
func (p onePeer) Snapshot() []sharder.PeerInfo { return []sharder.PeerInfo{p.self} }
func (onePeer) Run(ctx context.Context) error  { <-ctx.Done(); return nil }

// startRecorder is an aware that records the contexts it was started with.
type startRecorder struct {
	mu     sync.Mutex
	starts map[multicluster.ClusterName][]context.Context
}

func (r *startRecorder) Engage(ctx context.Context, name multicluster.ClusterName, _ ctrlcluster.Cluster) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts[name] = append(r.starts[name], ctx)
	return nil
}

// serving returns an error naming the first of names not served now.
func (r *startRecorder) serving(names ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		s := r.starts[multicluster.ClusterName(n)]
		if len(s) == 0 || s[len(s)-1].Err() != nil {
			return fmt.Errorf("%s is not served (started %d times)", n, len(s))
		}
	}
	return nil
}

func (r *startRecorder) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.starts[multicluster.ClusterName(name)])
}
