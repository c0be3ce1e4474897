package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// coordinator is multicluster-runtime's sharded coordinator with one repair.
//
// The library decides ownership on its ticker, with the manager's context, and, for a
// quick start, on every Engage with the engaging workspace's context; every workspace
// a decision starts runs under a context derived from the context of that decision.
// So when a workspace leaves (unbound, or its shard's endpoint stopped), every other
// workspace started in a decision it kicked stops with it, while the library still
// counts it started and renews its fence: no replica serves it until it is engaged
// anew (v0.24.1). At start-up this happens whenever a replica hands a shard over: two
// replicas at 500 workspaces left about a tenth of them unserved.
//
// The repair hands each workspace to the library with a context of its own that ends
// with a cause naming it (workspaceLeft), and registers one more aware, engaged first
// with every start, that watches the context the library derived. When that context
// ends because another workspace left, while this workspace's own context lives and
// this replica should still own it, the workspace is engaged again: the library keeps
// the fence it holds and starts the workspace under its own context. In every other
// case (the library stopped it, it left, it lost its fence) the library's decision
// stands.
type coordinator struct {
	lib  *sharded.Coordinator
	owns func(workspace string) bool
	log  logr.Logger

	mu      sync.Mutex
	engaged map[multicluster.ClusterName]*engagement
}

// engagement is a workspace as the cluster provider engaged it: its own context,
// which ends when it leaves, and its cluster.
type engagement struct {
	ctx context.Context
	cl  ctrlcluster.Cluster
}

// workspaceLeft is the cause with which a workspace's own context ends.
type workspaceLeft struct{ name multicluster.ClusterName }

func (w workspaceLeft) Error() string { return fmt.Sprintf("workspace %s left", w.name) }

var _ mcmanager.Coordinator = &coordinator{}

// newCoordinator wraps lib, which must have no awares yet; owns says whether this
// replica should serve a workspace now (the library's sharder).
func newCoordinator(lib *sharded.Coordinator, owns func(string) bool, log logr.Logger) *coordinator {
	c := &coordinator{lib: lib, owns: owns, log: log, engaged: map[multicluster.ClusterName]*engagement{}}
	lib.AddAware(orphanWatch{c})
	return c
}

func (c *coordinator) AddAware(a multicluster.Aware) { c.lib.AddAware(a) }

func (c *coordinator) Runnable() manager.Runnable { return c.lib.Runnable() }

// Engage hands the workspace to the library with a context of its own.
func (c *coordinator) Engage(ctx context.Context, name multicluster.ClusterName, cl ctrlcluster.Cluster) error {
	own, leave := context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() { leave(workspaceLeft{name}) })
	e := &engagement{ctx: own, cl: cl}
	c.mu.Lock()
	c.engaged[name] = e
	c.mu.Unlock()
	context.AfterFunc(own, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.engaged[name] == e {
			delete(c.engaged, name)
		}
	})
	if err := c.lib.Engage(own, name, cl); err != nil {
		leave(err)
		return fmt.Errorf("engaging workspace %s: %w", name, err)
	}
	return nil
}

// restart engages the workspace again if started (the context the library started
// it with) ended because another workspace left.
func (c *coordinator) restart(started context.Context, name multicluster.ClusterName, cl ctrlcluster.Cluster) {
	var left workspaceLeft
	if !errors.As(context.Cause(started), &left) || left.name == name {
		return
	}
	c.mu.Lock()
	e := c.engaged[name]
	c.mu.Unlock()
	if e == nil || e.cl != cl || e.ctx.Err() != nil || !c.owns(name.String()) {
		return
	}
	c.log.V(1).Info("workspace stopped because another left; engaging it again", "workspace", name, "left", left.name)
	if err := c.lib.Engage(e.ctx, name, cl); err != nil && e.ctx.Err() == nil {
		c.log.Error(err, "engaging a workspace again", "workspace", name)
	}
}

// orphanWatch is the aware that the library engages first with every workspace it
// starts: it watches the context of the start.
type orphanWatch struct{ c *coordinator }

func (o orphanWatch) Engage(ctx context.Context, name multicluster.ClusterName, cl ctrlcluster.Cluster) error {
	context.AfterFunc(ctx, func() { o.c.restart(ctx, name, cl) })
	return nil
}
