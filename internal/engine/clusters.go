package engine

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// clusterSet tracks the clusters the manager engaged, so that a ProviderConfig change
// can fan out to every object in every workspace. The manager engages it like any
// controller (it is a multicluster.Aware runnable).
type clusterSet struct {
	newList func() client.ObjectList
	// wrap, if set, replaces each engaged cluster (Setup.WrapCluster).
	wrap func(ctrlcluster.Cluster) (ctrlcluster.Cluster, error)

	mu       sync.RWMutex
	clusters map[string]*engagedCluster
	// inflight counts the reconciles running per cluster; idle is closed when a
	// cluster's count drops to zero (Drain).
	inflight map[string]int
	idle     map[string]chan struct{}
}

// engagedCluster is a cluster as the manager engaged it.
type engagedCluster struct {
	cl ctrlcluster.Cluster
	// ctx ends when the engagement does; serving, if set, says whether the replica
	// may still act for the cluster (WhileServing).
	ctx     context.Context
	serving func() bool
}

type servingKey struct{}

// WhileServing returns ctx, for engaging a cluster, with serving attached: before
// each reconcile of the cluster the engine asks it, and reconciles nothing while it
// says no. A replica whose membership lapsed stops at once, before its workspaces'
// contexts are cancelled (internal/sharding).
func WhileServing(ctx context.Context, serving func() bool) context.Context {
	return context.WithValue(ctx, servingKey{}, serving)
}

var _ multicluster.Aware = &clusterSet{}

func newClusterSet(newList func() client.ObjectList, wrap func(ctrlcluster.Cluster) (ctrlcluster.Cluster, error)) *clusterSet {
	return &clusterSet{newList: newList, wrap: wrap, clusters: map[string]*engagedCluster{},
		inflight: map[string]int{}, idle: map[string]chan struct{}{}}
}

// Start only blocks: the set has nothing to run.
func (s *clusterSet) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Engage records the cluster until its context ends (the workspace unbound or vanished).
func (s *clusterSet) Engage(ctx context.Context, name multicluster.ClusterName, cl ctrlcluster.Cluster) error {
	if s.wrap != nil {
		wrapped, err := s.wrap(cl)
		if err != nil {
			return fmt.Errorf("engaging %s: %w", name, err)
		}
		cl = wrapped
	}
	e := &engagedCluster{cl: cl, ctx: ctx}
	e.serving, _ = ctx.Value(servingKey{}).(func() bool)
	s.mu.Lock()
	s.clusters[string(name)] = e
	s.mu.Unlock()
	// AfterFunc, not a goroutine waiting on ctx: a parked goroutine per engaged
	// workspace is a stack per workspace.
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		if s.clusters[string(name)] == e {
			delete(s.clusters, string(name))
		}
		s.mu.Unlock()
	})
	return nil
}

// acquire returns the engaged cluster name for one reconcile, and a context that
// ends with the engagement as well as with ctx; release must be called when the
// reconcile is done. False when the cluster is not engaged, or not served any more.
func (s *clusterSet) acquire(ctx context.Context, name string) (ctrlcluster.Cluster, context.Context, func(), bool) {
	s.mu.Lock()
	e, ok := s.clusters[name]
	if !ok || e.ctx.Err() != nil || e.serving != nil && !e.serving() {
		s.mu.Unlock()
		return nil, nil, nil, false
	}
	s.inflight[name]++
	s.mu.Unlock()
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.ctx, cancel)
	return e.cl, rctx, func() {
		stop()
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.inflight[name]--; s.inflight[name] == 0 {
			delete(s.inflight, name)
			if idle := s.idle[name]; idle != nil {
				close(idle)
				delete(s.idle, name)
			}
		}
	}, true
}

// Drain returns once no reconcile of the named cluster runs (sharding.Drainer): the
// coordinator calls it after the cluster's engagement ended, before it tells the
// other replicas that this one serves the workspace no more.
func (s *clusterSet) Drain(ctx context.Context, name multicluster.ClusterName) error {
	for {
		s.mu.Lock()
		if s.inflight[string(name)] == 0 {
			s.mu.Unlock()
			return nil
		}
		idle := s.idle[string(name)]
		if idle == nil {
			idle = make(chan struct{})
			s.idle[string(name)] = idle
		}
		s.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("draining the reconciles of %s: %w", name, ctx.Err())
		}
	}
}

// Len is the number of engaged clusters.
func (s *clusterSet) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.clusters)
}

// Get returns an engaged cluster.
func (s *clusterSet) Get(name string) (ctrlcluster.Cluster, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.clusters[name]
	if !ok {
		return nil, false
	}
	return e.cl, true
}

// List returns a request for every object in the named cluster, or in all of them.
// It reads the informer caches only.
func (s *clusterSet) List(ctx context.Context, name string) []mcreconcile.Request {
	s.mu.RLock()
	targets := map[string]ctrlcluster.Cluster{}
	for n, e := range s.clusters {
		if name == "" || n == name {
			targets[n] = e.cl
		}
	}
	s.mu.RUnlock()

	var reqs []mcreconcile.Request
	for n, cl := range targets {
		reqs = append(reqs, requestsIn(ctx, s.newList, n, cl)...)
	}
	return reqs
}

// requestsIn returns a request for every object in cl's cache.
func requestsIn(ctx context.Context, newList func() client.ObjectList, name string, cl ctrlcluster.Cluster) []mcreconcile.Request {
	list := newList()
	if err := cl.GetCache().List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "listing objects for fan-out", "cluster", name)
		return nil
	}
	var reqs []mcreconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return nil
		}
		reqs = append(reqs, mcreconcile.Request{
			ClusterName: multicluster.ClusterName(name),
			Request:     reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)},
		})
		return nil
	})
	return reqs
}

// knownClusters are the clusters the manager's provider knows, whether or not this
// replica serves them: with several replicas sharing the workspaces
// (internal/sharding), another replica's workspace still exists. The orphan sweep asks
// through it whether a tenant is gone.
type knownClusters struct {
	served *clusterSet
	get    func(context.Context, multicluster.ClusterName) (ctrlcluster.Cluster, error)
}

// List returns requests for the objects of the named cluster, or of every served one
// when name is empty.
func (k knownClusters) List(ctx context.Context, name string) []mcreconcile.Request {
	if name == "" {
		return k.served.List(ctx, "")
	}
	cl, ok := k.Get(name)
	if !ok {
		return nil
	}
	return requestsIn(ctx, k.served.newList, name, cl)
}

// Get returns a cluster the provider knows.
func (k knownClusters) Get(name string) (ctrlcluster.Cluster, bool) {
	if cl, ok := k.served.Get(name); ok {
		return cl, true
	}
	cl, err := k.get(context.Background(), multicluster.ClusterName(name))
	return cl, err == nil && cl != nil
}

// ownedBy returns a cluster wrapper that applies wrap, if set, and then names owner
// as the field manager of every write through the cluster's client.
func ownedBy(owner string, wrap func(ctrlcluster.Cluster) (ctrlcluster.Cluster, error)) func(ctrlcluster.Cluster) (ctrlcluster.Cluster, error) {
	if owner == "" {
		return wrap
	}
	return func(cl ctrlcluster.Cluster) (ctrlcluster.Cluster, error) {
		if wrap != nil {
			var err error
			if cl, err = wrap(cl); err != nil {
				return nil, err
			}
		}
		return fieldOwnedCluster{Cluster: cl, client: client.WithFieldOwner(cl.GetClient(), owner)}, nil
	}
}

// fieldOwnedCluster is a cluster whose client names a field manager.
type fieldOwnedCluster struct {
	ctrlcluster.Cluster
	client client.Client
}

func (c fieldOwnedCluster) GetClient() client.Client { return c.client }
