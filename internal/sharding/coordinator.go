package sharding

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
)

// Drainer is an aware whose work for a workspace can outlive the context the
// workspace was started with (a reconcile in flight when it ended): Drain returns
// once none is left. The coordinator drains a workspace it stops before it tells the
// other replicas that it serves it no more.
type Drainer interface {
	Drain(ctx context.Context, name multicluster.ClusterName) error
}

// coordinator engages each workspace in the one replica that the live members'
// view gives it to, with no fence of its own: a replica starts a workspace only
// while its membership is valid and every live member has published the view it
// decides with, and a member publishes a view only after it has stopped and drained
// every workspace outside its share of it (docs/design/replicas.md). The steady state
// writes nothing but the members' renewals, however many workspaces there are.
type coordinator struct {
	m *membership
	// decision returns the view of the members and shards as they are now and the
	// share of this replica in it.
	decision func() (view string, owns func(workspace string) bool)
	log      logr.Logger
	// alongside, if set, runs while the coordinator does.
	alongside func(context.Context)

	awares []multicluster.Aware
	kick   chan struct{}

	// decideMu makes decisions and the stop after a lapsed membership one at a time.
	decideMu sync.Mutex

	mu      sync.Mutex
	engaged map[multicluster.ClusterName]*workspace
	// leaving are workspaces that left while started (unbound, or their shard no
	// longer watched here): they are drained before the next view is published.
	leaving []leaving
}

// workspace is a workspace the cluster provider engaged.
type workspace struct {
	// ctx is the provider's, ending when the workspace leaves.
	ctx context.Context
	cl  ctrlcluster.Cluster
	// run is the current start, nil while this replica does not serve it.
	run *run
}

// run is one start of a workspace in this replica.
type run struct {
	cancel context.CancelFunc
	// engaged is closed once every aware's Engage returned.
	engaged chan struct{}
}

type leaving struct {
	name multicluster.ClusterName
	run  *run
}

var _ mcmanager.Coordinator = &coordinator{}

func newCoordinator(m *membership, decision func() (string, func(string) bool), log logr.Logger) *coordinator {
	return &coordinator{m: m, decision: decision, log: log, kick: make(chan struct{}, 1),
		engaged: map[multicluster.ClusterName]*workspace{}}
}

func (c *coordinator) AddAware(a multicluster.Aware) { c.awares = append(c.awares, a) }

// poke asks for a decision.
func (c *coordinator) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Engage records a workspace the cluster provider engaged; the next decision starts
// it if it is this replica's.
func (c *coordinator) Engage(ctx context.Context, name multicluster.ClusterName, cl ctrlcluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &workspace{ctx: ctx, cl: cl}
	c.mu.Lock()
	if old := c.engaged[name]; old != nil && old.run != nil {
		old.run.cancel()
		c.leaving = append(c.leaving, leaving{name, old.run})
	}
	c.engaged[name] = w
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		if c.engaged[name] == w {
			delete(c.engaged, name)
			if w.run != nil {
				c.leaving = append(c.leaving, leaving{name, w.run})
				w.run = nil
			}
		}
		c.mu.Unlock()
		c.poke()
	})
	c.poke()
	return nil
}

// Runnable runs the membership and the decisions; when the manager stops, it stops
// and drains every workspace before it deletes this replica's Lease.
func (c *coordinator) Runnable() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		mctx, stopMembership := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.m.Run(mctx)
		}()
		if c.alongside != nil {
			go c.alongside(ctx)
		}
		defer func() {
			drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			c.stopAll(drain)
			stopMembership()
			<-done
			c.m.leave()
		}()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-c.kick:
				c.decide(ctx)
			}
		}
	})
}

// decide stops what is no longer this replica's, publishes the view once that is
// done, and starts what is this replica's once every member has published the same
// view.
func (c *coordinator) decide(ctx context.Context) {
	c.decideMu.Lock()
	defer c.decideMu.Unlock()
	if !c.m.valid() {
		c.lost()
		return
	}
	view, owns := c.decision()
	c.mu.Lock()
	var stops []leaving
	for name, w := range c.engaged {
		if w.run != nil && !owns(name.String()) {
			w.run.cancel()
			stops = append(stops, leaving{name, w.run})
			w.run = nil
		}
	}
	stops = append(stops, c.leaving...)
	c.leaving = nil
	c.mu.Unlock()
	if !c.drain(ctx, stops) {
		return
	}
	if c.m.publishedView() != view {
		if err := c.m.publish(ctx, view); err != nil {
			if ctx.Err() == nil {
				c.log.Error(err, "publishing this replica's view")
			}
			return
		}
	}
	if !c.m.settled() || !c.m.agreed(view) || !c.m.valid() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.engaged {
		if w.run == nil && w.ctx.Err() == nil && owns(name.String()) {
			c.start(name, w)
		}
	}
}

// start engages the awares with the workspace under a context of its own; the mutex
// is held.
func (c *coordinator) start(name multicluster.ClusterName, w *workspace) {
	ctx, cancel := context.WithCancel(w.ctx)
	// The engine reconciles nothing more once this replica's membership lapsed, even
	// before lost cancels the start (a paused process wakes with both due at once).
	ctx = engine.WhileServing(ctx, c.m.valid)
	r := &run{cancel: cancel, engaged: make(chan struct{})}
	w.run = r
	c.log.V(1).Info("serving workspace", "workspace", name)
	go func() {
		defer close(r.engaged)
		for _, a := range c.awares {
			if err := a.Engage(ctx, name, w.cl); err != nil {
				if ctx.Err() == nil {
					c.log.Error(err, "engaging a workspace; trying again at the next decision", "workspace", name)
				}
				cancel()
				c.mu.Lock()
				if w.run == r {
					w.run = nil
					c.leaving = append(c.leaving, leaving{name, r})
				}
				c.mu.Unlock()
				return
			}
		}
	}()
}

// drain waits until the stopped workspaces' awares returned from Engage and drained
// their work; false if ctx ended first.
func (c *coordinator) drain(ctx context.Context, stops []leaving) bool {
	for _, s := range stops {
		select {
		case <-s.run.engaged:
		case <-ctx.Done():
			return false
		}
		for _, a := range c.awares {
			if d, ok := a.(Drainer); ok {
				if err := d.Drain(ctx, s.name); err != nil {
					return false
				}
			}
		}
	}
	if len(stops) > 0 {
		c.log.V(1).Info("stopped serving workspaces", "count", len(stops))
	}
	return true
}

// lost stops every workspace at once when this replica's renewal deadline passed:
// the other replicas count it out a lease duration after its last renewal, and take
// its share. It only cancels (it runs in the membership's renewal, which must not
// wait); the next decision drains them before this replica publishes a view again.
func (c *coordinator) lost() {
	if n := c.cancelAll(); n > 0 {
		c.log.Info("membership renewal deadline passed; stopped serving every workspace until renewed", "workspaces", n)
	}
	c.poke()
}

// cancelAll cancels every start and counts them leaving.
func (c *coordinator) cancelAll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for name, w := range c.engaged {
		if w.run != nil {
			w.run.cancel()
			c.leaving = append(c.leaving, leaving{name, w.run})
			w.run = nil
			n++
		}
	}
	return n
}

// stopAll stops and drains every workspace: the manager is stopping.
func (c *coordinator) stopAll(ctx context.Context) {
	c.decideMu.Lock()
	defer c.decideMu.Unlock()
	c.cancelAll()
	c.mu.Lock()
	stops := c.leaving
	c.leaving = nil
	c.mu.Unlock()
	if !c.drain(ctx, stops) {
		c.log.Error(ctx.Err(), "stopped workspaces not drained")
	}
}
