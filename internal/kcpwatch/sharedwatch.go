package kcpwatch

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/kcp-dev/logicalcluster/v3"
	mcpcache "github.com/kcp-dev/multicluster-provider/pkg/cache"
	mcrecorder "github.com/kcp-dev/multicluster-provider/pkg/events/recorder"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpprovider"
)

// SharedWatch delivers the events of the Service objects of every engaged workspace
// through one event handler on the virtual workspace's wildcard informer.
//
// The usual multicluster-runtime watch is a source per engaged cluster, and kcp's
// multicluster-provider copies every event into every workspace's listener, so memory
// and handler calls grow with workspaces (measured: docs/design/kcp-mode.md, "One watch
// of the Service type"). SharedWatch adds a single handler and hands each event to the
// handler of the object's own workspace.
//
// Wire it in three places: NewProvider (or NewCluster as a provider's NewCluster: it
// learns the wildcard caches from it), Source as the controller's source of Service object
// events, and the SharedWatch itself as a runnable of the manager (Engage queues the
// objects of a workspace that engages after its objects' events were handled, since
// the reconcile of a workspace not yet engaged finds no cluster and drops them).
type SharedWatch struct {
	obj     client.Object
	newList func() client.ObjectList

	mu sync.Mutex
	// caches are the wildcard caches of the virtual workspaces (one per kcp shard
	// with a binding), by virtual workspace URL.
	caches   map[string]mcpcache.WildcardCache
	handlers func(multicluster.ClusterName) handler.TypedEventHandler[client.Object, mcreconcile.Request]
	queue    workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	ctx      context.Context
	// stops remove the shared handler from each cache's informer, by URL.
	stops map[string]func()
	// vwHooks are told of each virtual workspace as it is first seen, goneHooks of
	// each that left the endpoint slice.
	vwHooks   []func(*rest.Config) error
	goneHooks []func(url string)
}

// NewSharedWatch returns a SharedWatch of the Service type of obj, whose lists newList
// returns.
func NewSharedWatch(obj client.Object, newList func() client.ObjectList) *SharedWatch {
	return &SharedWatch{obj: obj, newList: newList, caches: map[string]mcpcache.WildcardCache{}, stops: map[string]func(){}}
}

// NewCluster is kcp's default scoped cluster; it also remembers the wildcard cache
// behind it (one per virtual workspace shard) and, once the source runs, adds the
// shared handler to that cache's informer of the Service type. A failure fails the
// workspace's engagement, which the provider retries: a virtual workspace counts as
// known only once its handler and hooks succeeded.
func (w *SharedWatch) NewCluster(cfg *rest.Config, name logicalcluster.Name, wildcard mcpcache.WildcardCache, scheme *runtime.Scheme, recorders mcrecorder.EventRecorderGetter) (*mcpcache.ScopedCluster, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	url := cfg.Host
	if w.caches[url] != wildcard {
		// A shard's virtual workspace that left the endpoint slice and came back, or
		// whose watch was started anew, has a new cache; the old one stopped.
		w.forget(url)
		if w.queue != nil {
			if err := w.addHandler(url, wildcard); err != nil {
				return nil, err
			}
		}
		for _, hook := range w.vwHooks {
			if err := hook(cfg); err != nil {
				if stop := w.stops[url]; stop != nil {
					stop()
				}
				delete(w.stops, url)
				return nil, err
			}
		}
		w.caches[url] = wildcard
	}
	return mcpcache.NewScopedCluster(cfg, name, wildcard, scheme, recorders)
}

// NewProvider returns kcp mode's cluster provider (package kcpprovider) for the
// virtual workspaces of the endpoint slice endpointSlice, making each workspace's
// cluster with NewCluster; name labels its metrics.
func (w *SharedWatch) NewProvider(cfg *rest.Config, endpointSlice, name string, scheme *runtime.Scheme) (*kcpprovider.Provider, error) {
	return kcpprovider.New(cfg, endpointSlice, kcpprovider.Options{
		Scheme: scheme, Name: name, NewCluster: w.NewCluster,
		// The provider stops the endpoints of shards that left the slice; the shared
		// watch and its hooks learn it here, from the same list.
		Endpoints: w.endpoints,
	})
}

// OnVirtualWorkspace makes NewCluster tell hook of each virtual workspace (one per kcp
// shard) as it first sees it, with the config it reaches it with. Call it before the
// provider starts.
func (w *SharedWatch) OnVirtualWorkspace(hook func(*rest.Config) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.vwHooks = append(w.vwHooks, hook)
}

// OnVirtualWorkspaceGone makes the SharedWatch tell hook the URL of each virtual
// workspace that left the endpoint slice (its shard has no binding left). Call it
// before the provider starts.
func (w *SharedWatch) OnVirtualWorkspaceGone(hook func(url string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.goneHooks = append(w.goneHooks, hook)
}

// endpoints is told the endpoint slice's URLs on every change of it, and forgets the
// virtual workspaces no longer among them.
func (w *SharedWatch) endpoints(urls []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for url := range w.caches {
		if !slices.Contains(urls, url) {
			w.forget(url)
		}
	}
}

// forget drops the virtual workspace at url, if known, and tells the gone hooks;
// w.mu held.
func (w *SharedWatch) forget(url string) {
	if _, ok := w.caches[url]; !ok {
		return
	}
	if stop := w.stops[url]; stop != nil {
		stop()
	}
	delete(w.stops, url)
	delete(w.caches, url)
	for _, hook := range w.goneHooks {
		hook(url)
	}
}

// Source returns the controller's source of Service object events; handlers returns
// the event handler of one workspace's objects.
func (w *SharedWatch) Source(handlers func(multicluster.ClusterName) handler.TypedEventHandler[client.Object, mcreconcile.Request]) source.TypedSource[mcreconcile.Request] {
	w.mu.Lock()
	w.handlers = handlers
	w.mu.Unlock()
	return source.TypedFunc[mcreconcile.Request](w.start)
}

// start registers the shared handler on every wildcard cache known so far; the
// informer replays the objects it holds to a new handler.
func (w *SharedWatch) start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue != nil {
		return fmt.Errorf("shared watch of %T started twice", w.obj)
	}
	w.ctx, w.queue = ctx, q
	for url, c := range w.caches {
		if err := w.addHandler(url, c); err != nil {
			return err
		}
	}
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, stop := range w.stops {
			stop()
		}
		w.stops, w.queue = map[string]func(){}, nil
	})
	return nil
}

// addHandler adds the shared handler to the Service type's informer of c, the cache of
// the virtual workspace at url; w.mu held.
func (w *SharedWatch) addHandler(url string, c mcpcache.WildcardCache) error {
	inf, err := c.GetInformer(w.ctx, w.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("wildcard informer of %T: %w", w.obj, err)
	}
	ctx, q, handlers := w.ctx, w.queue, w.handlers
	forObj := func(o any) (handler.TypedEventHandler[client.Object, mcreconcile.Request], client.Object, bool) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		obj, ok := o.(client.Object)
		if !ok {
			return nil, nil, false
		}
		return handlers(multicluster.ClusterName(logicalcluster.From(obj).String())), obj, true
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if h, obj, ok := forObj(o); ok {
				h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: obj}, q)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			h, obj, ok := forObj(newObj)
			old, okOld := oldObj.(client.Object)
			if ok && okOld {
				h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: old, ObjectNew: obj}, q)
			}
		},
		DeleteFunc: func(o any) {
			if h, obj, ok := forObj(o); ok {
				h.Delete(ctx, event.TypedDeleteEvent[client.Object]{Object: obj}, q)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("shared handler of %T: %w", w.obj, err)
	}
	w.stops[url] = func() { _ = inf.RemoveEventHandler(reg) }
	return nil
}

// Engage queues the Service objects of a workspace as it engages, for the events
// handled before (see SharedWatch).
func (w *SharedWatch) Engage(ctx context.Context, name multicluster.ClusterName, cl ctrlcluster.Cluster) error {
	w.mu.Lock()
	q, handlers := w.queue, w.handlers
	w.mu.Unlock()
	if q == nil {
		// The source has not started; its handler sees every object when it does.
		return nil
	}
	list := w.newList()
	if err := cl.GetCache().List(ctx, list); err != nil {
		// Not fatal to the workspace: its objects' next event brings them.
		log.FromContext(ctx).Error(err, "listing objects of an engaging workspace", "cluster", name)
		return nil
	}
	h := handlers(name)
	return meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			h.Generic(ctx, event.TypedGenericEvent[client.Object]{Object: obj}, q)
		}
		return nil
	})
}

// Start makes SharedWatch a manager runnable (for Engage); it has nothing to run.
func (w *SharedWatch) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
