package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/sharding"
)

// serving records, for every workspace, when each replica started and stopped
// serving it: the test's own aware, engaged by every replica's coordinator.
type serving struct {
	mu        sync.Mutex
	intervals map[string][]interval
}

type interval struct {
	replica    string
	start, end time.Time // end zero while serving
}

func newServing() *serving { return &serving{intervals: map[string][]interval{}} }

// aware is replica's aware, recording into s.
func (s *serving) aware(replica string) multicluster.Aware { return servingAware{s, replica} }

type servingAware struct {
	s       *serving
	replica string
}

func (a servingAware) Engage(ctx context.Context, name multicluster.ClusterName, _ ctrlcluster.Cluster) error {
	a.s.mu.Lock()
	ws := name.String()
	a.s.intervals[ws] = append(a.s.intervals[ws], interval{replica: a.replica, start: time.Now()})
	i := len(a.s.intervals[ws]) - 1
	a.s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		a.s.mu.Lock()
		a.s.intervals[ws][i].end = time.Now()
		a.s.mu.Unlock()
	})
	return nil
}

// owners returns, by workspace, the replicas serving it now.
func (s *serving) owners() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for ws, ivs := range s.intervals {
		for _, iv := range ivs {
			if iv.end.IsZero() {
				out[ws] = append(out[ws], iv.replica)
			}
		}
	}
	return out
}

// overlaps lists every pair of intervals of two replicas serving one workspace at
// the same time.
func (s *serving) overlaps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for ws, ivs := range s.intervals {
		for i, a := range ivs {
			for _, b := range ivs[i+1:] {
				aEnd, bEnd := a.end, b.end
				if aEnd.IsZero() {
					aEnd = time.Now()
				}
				if bEnd.IsZero() {
					bEnd = time.Now()
				}
				if a.start.Before(bEnd) && b.start.Before(aEnd) {
					out = append(out, fmt.Sprintf("%s: %s %s-%s and %s %s-%s", ws, a.replica, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli),
						b.replica, b.start.Format(time.StampMilli), b.end.Format(time.StampMilli)))
				}
			}
		}
	}
	return out
}

// lastEnd is when replica last stopped serving a workspace; startedAfter is when
// the first replica other than replica started a workspace after t.
func (s *serving) lastEnd(replica string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, ivs := range s.intervals {
		for _, iv := range ivs {
			if iv.replica == replica && iv.end.After(last) {
				last = iv.end
			}
		}
	}
	return last
}

func (s *serving) firstStartAfter(t time.Time, replica string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, ivs := range s.intervals {
		for _, iv := range ivs {
			if iv.replica != replica && iv.start.After(t) && (first.IsZero() || iv.start.Before(first)) {
				first = iv.start
			}
		}
	}
	return first
}

// coordinated is a replica whose coordinator runs, with every workspace engaged.
type coordinated struct {
	name string
	r    *sharding.Replicas
	stop func()
	// cut, when set, fails every write of the replica's Lease: it is cut off from the
	// API server.
	cut *atomic.Bool
}

// TestCoordinatorMovesWorkspacesWithoutOverlap runs three replicas' coordinators on a
// real API server over 60 workspaces: each workspace is served by exactly one replica
// through a scale-up, a graceful scale-down and a replica cut off from the API server
// (its renewals fail); no two replicas ever serve one workspace at once; the cut-off
// replica stops serving before its renewal deadline has passed by a refresh, and the
// others start its workspaces only after its lease expired; at steady state the
// replicas write only their renewals, whatever the number of workspaces.
func TestCoordinatorMovesWorkspacesWithoutOverlap(t *testing.T) {
	ctx := t.Context()
	direct := platformClient(t)
	var writes atomic.Int64
	rec := newServing()
	workspaces := make([]string, 60)
	for i := range workspaces {
		workspaces[i] = fmt.Sprintf("ws-%d", i)
	}
	start := func(name string) *coordinated {
		cut := &atomic.Bool{}
		counted := countingClient{Client: direct, writes: &writes, cut: cut}
		r := newTestReplica(counted, name, nil)
		coord := r.Coordinator()
		coord.AddAware(rec.aware(name))
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = coord.Runnable().Start(rctx) }()
		for _, ws := range workspaces {
			if err := coord.Engage(rctx, multicluster.ClusterName(ws), nil); err != nil {
				t.Fatal(err)
			}
		}
		return &coordinated{name: name, r: r, cut: cut, stop: func() { cancel(); <-done }}
	}
	wantEachServedOnce := func(what string, replicas ...string) {
		t.Helper()
		harness.Eventually(ctx, t, 4*testTTL, what, func(context.Context) error {
			owners := rec.owners()
			share := map[string]int{}
			for _, ws := range workspaces {
				if len(owners[ws]) != 1 {
					return fmt.Errorf("%s served by %v", ws, owners[ws])
				}
				share[owners[ws][0]]++
			}
			for _, r := range replicas {
				if share[r] == 0 {
					return fmt.Errorf("shares %v: %s serves nothing", share, r)
				}
			}
			if len(share) != len(replicas) {
				return fmt.Errorf("shares %v, want among %v", share, replicas)
			}
			return nil
		})
		if o := rec.overlaps(); len(o) > 0 {
			t.Fatalf("%s: served by two replicas at once:\n%v", what, o)
		}
	}

	a, b := start("a"), start("b")
	defer a.stop()
	defer b.stop()
	wantEachServedOnce("a and b share the workspaces", "a", "b")

	// Steady state: the renewals only, one per replica every half the renewal
	// deadline (5/8 of the lease), however many workspaces.
	before := writes.Load()
	window := 3 * testTTL
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(window):
	}
	renewEvery := testTTL * 5 / 8 / 2
	if n, most := writes.Load()-before, 2*int64(window/renewEvery+1); n > most {
		t.Errorf("%d Lease writes by 2 replicas serving %d workspaces in %s, want at most %d (their renewals)", n, len(workspaces), window, most)
	} else {
		t.Logf("steady state: %d Lease writes by 2 replicas serving %d workspaces in %s", n, len(workspaces), window)
	}

	c := start("c")
	defer c.stop()
	wantEachServedOnce("c joins", "a", "b", "c")

	b.stop()
	wantEachServedOnce("b left", "a", "c")

	// a is cut off: its renewals fail. It stops serving at its renewal deadline;
	// c takes a's workspaces only once a's lease has expired in c's eyes.
	a.cut.Store(true)
	cutAt := time.Now()
	wantEachServedOnce("a cut off", "c")
	stopped, taken := rec.lastEnd("a"), rec.firstStartAfter(cutAt, "a")
	t.Logf("a cut off: stopped serving after %s, c started its workspaces after %s (renewal deadline %s, lease %s)",
		stopped.Sub(cutAt).Round(10*time.Millisecond), taken.Sub(cutAt).Round(10*time.Millisecond), testTTL*5/8, testTTL)
	if !stopped.Before(taken) {
		t.Errorf("a stopped at %s, after c started its workspaces at %s", stopped, taken)
	}
	if d := stopped.Sub(cutAt); d > testTTL*5/8+testRefresh {
		t.Errorf("a stopped serving %s after it was cut off, want within its renewal deadline (%s)", d, testTTL*5/8)
	}

	// Back in touch, a renews, and takes its share again from c.
	a.cut.Store(false)
	wantEachServedOnce("a back", "a", "c")
}

// countingClient counts writes of Leases, and fails them while cut is set.
type countingClient struct {
	client.Client
	writes *atomic.Int64
	cut    *atomic.Bool
}

var errCut = errors.New("cut off from the API server")

// written counts a write of obj, or refuses it while the client is cut off.
func (c countingClient) written(obj client.Object) error {
	if c.cut.Load() {
		return errCut
	}
	if _, ok := obj.(*coordinationv1.Lease); ok {
		c.writes.Add(1)
	}
	return nil
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.written(obj); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.written(obj); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Client.List(ctx, list, opts...)
}
