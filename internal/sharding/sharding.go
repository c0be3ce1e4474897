package sharding

import (
	"context"
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
	// limit of its own: renewals must not queue behind the reconciles' requests.
	Client client.Client
	// Namespace holds the membership and fencing Leases: the provider's namespace.
	Namespace string
	// Name prefixes the Leases ("<name>-replica-<replica>", "<name>-ws-<workspace>").
	Name string
	// Replica is this replica's identity, unique among the running replicas.
	Replica string
	// LeaseDuration is both how long a silent replica stays a member and how long its
	// fence on a workspace holds: a killed replica's workspaces move after about
	// that long. Renewals happen every third of it.
	LeaseDuration time.Duration
	// Probe is how often the coordinator re-decides ownership.
	Probe time.Duration
	// Provider labels the metrics.
	Provider string
	Log      logr.Logger
}

// Replicas is this replica's view of the replicas sharing kcp mode's workspaces.
type Replicas struct {
	registry *registry
	coord    *sharded.Coordinator
	hrw      sharder.Sharder
	provider string
}

// New returns the replica's coordinator and view; nothing runs until the manager
// given Coordinator starts.
func New(o Options) *Replicas {
	log := o.Log.WithName("sharding").WithValues("replica", o.Replica)
	reg := newRegistry(o.Client, o.Namespace, o.Name+"-replica", o.Replica, o.LeaseDuration, o.Probe, log,
		func(n int) { metrics.KCPReplicasSeen(o.Provider, n) })
	coord := sharded.New(o.Client, log,
		sharded.WithPeerRegistry(reg),
		sharded.WithShardLease(o.Namespace, o.Name+"-ws"),
		sharded.WithPerClusterLease(true),
		// The library's rule of thumb: renew at a third of the duration.
		sharded.WithLeaseTimings(o.LeaseDuration, o.LeaseDuration/3, o.Probe/2),
		sharded.WithSynchronizationIntervals(o.Probe, 3*o.Probe),
	)
	return &Replicas{registry: reg, coord: coord, hrw: sharder.NewHRW(), provider: o.Provider}
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

// Responsible says whether this replica is the one the sharder names for the
// workspace among the live replicas. Work tied to no engaged workspace (the sweep of
// a workspace that is gone) asks it, so that one replica does it.
func (r *Replicas) Responsible(workspace string) bool {
	return r.hrw.ShouldOwn(workspace, r.registry.Snapshot(), r.registry.Self())
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
