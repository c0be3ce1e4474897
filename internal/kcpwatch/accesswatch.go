package kcpwatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	kcpcache "github.com/kcp-dev/apimachinery/v2/pkg/cache"
	"github.com/kcp-dev/logicalcluster/v3"
	mcpcache "github.com/kcp-dev/multicluster-provider/pkg/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// AccessWatch repairs tampering with the worker's access within seconds. It watches,
// through each virtual workspace, the objects the Minter keeps in every tenant
// workspace (ServiceAccounts, ClusterRoles and ClusterRoleBindings carrying the
// runtime's labels, and nothing else), and when one of them is no longer what the
// Minter wants (tokens.Minter.Drifted) it queues that workspace's Service objects:
// their reconcile reads, repairs and re-mints (see docs/design/tenant-credentials.md).
//
// Without it, drift waited for the Minter's recheck interval (two minutes) and the
// object stayed Ready all the while. One wildcard watch per type and virtual workspace,
// filtered by label on the server, keeps only the runtime's own objects in memory.
//
// Wire it with SharedWatch.OnVirtualWorkspace (it learns the virtual workspace URLs
// there) and Source as a source of the engine's controller (engine.Setup.Sources).
type AccessWatch struct {
	minters  []*tokens.Minter
	scheme   *runtime.Scheme
	selector labels.Selector

	mu sync.Mutex
	// configs are the virtual workspaces to watch, by URL.
	configs map[string]*rest.Config
	ctx     context.Context
	queue   workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	lister  engine.ClusterLister
	// watches are the running watches, by virtual workspace URL.
	watches map[string]*vwWatch
	// backoff spaces the attempts to watch a virtual workspace, by URL.
	backoff workqueue.TypedRateLimiter[string]
}

// Backoff of a virtual workspace whose watch could not be set up (it does not serve
// the claimed resources yet, say): tried again after accessRetryMin, doubling up to
// accessRetryMax, until it works or the virtual workspace goes.
const (
	accessRetryMin = time.Second
	accessRetryMax = time.Minute
)

// vwWatch is the watch of one virtual workspace: an informer per watched type (Get
// reads them) and the stop of its cache.
type vwWatch struct {
	informers map[reflect.Type]toolscache.SharedIndexInformer
	stop      context.CancelFunc
}

// NewAccessWatch returns an AccessWatch of the objects that carry managedBy; ReportTo
// names the minters that keep them.
func NewAccessWatch(scheme *runtime.Scheme, managedBy map[string]string) *AccessWatch {
	return &AccessWatch{scheme: scheme, selector: labels.SelectorFromSet(managedBy),
		configs: map[string]*rest.Config{}, watches: map[string]*vwWatch{},
		backoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](accessRetryMin, accessRetryMax)}
}

// ReportTo names the minters whose objects are watched (the provider's credential and,
// declared apart, its worker's): each is told of every change (tokens.Minter.Drifted).
// Call it before the source starts. The minters may read from the watch in turn
// (tokens.Options.Cache), which is why they are not known when it is made.
func (w *AccessWatch) ReportTo(minters ...*tokens.Minter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.minters = append(w.minters, minters...)
}

// Get reads a watched object of the workspace cluster from the watch's caches, for
// tokens.Options.Cache. A workspace lives on one kcp shard, so at most one virtual
// workspace's cache holds it; NotFound means every one has synced and none does.
// Before the source runs, or while a cache syncs, it cannot tell.
func (w *AccessWatch) Get(cluster logicalcluster.Name, key client.ObjectKey, obj client.Object) error {
	w.mu.Lock()
	var infs []toolscache.SharedIndexInformer
	for _, vw := range w.watches {
		if inf := vw.informers[reflect.TypeOf(obj)]; inf != nil {
			infs = append(infs, inf)
		}
	}
	n := len(w.configs)
	w.mu.Unlock()
	if len(infs) == 0 || len(infs) < n {
		return errNotWatched
	}
	storeKey := kcpcache.ToClusterAwareKey(cluster.String(), key.Namespace, key.Name)
	for _, inf := range infs {
		if !inf.HasSynced() {
			return errNotWatched
		}
		item, exists, err := inf.GetIndexer().GetByKey(storeKey)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		cached, ok := item.(client.Object)
		if !ok || reflect.TypeOf(cached) != reflect.TypeOf(obj) {
			return fmt.Errorf("access watch holds %T under %s, want %T", item, storeKey, obj)
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(cached.DeepCopyObject()).Elem())
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, w.scheme)
	if err != nil {
		return err
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
}

// errNotWatched is Get's answer while it cannot tell: the reader goes to the server.
var errNotWatched = errors.New("access watch not synced")

// VirtualWorkspace is told of a virtual workspace (one per kcp shard); it watches it
// once the source runs. A watch that cannot be set up is retried with backoff, and
// meanwhile Get sends the Minters' reads to the server: it never fails the caller.
func (w *AccessWatch) VirtualWorkspace(cfg *rest.Config) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.configs[cfg.Host] != nil {
		return nil
	}
	w.configs[cfg.Host] = cfg
	if w.queue == nil {
		return nil
	}
	w.tryWatch(cfg)
	return nil
}

// VirtualWorkspaceGone is told of a virtual workspace that left the endpoint slice
// (its shard has no binding left): its watch stops, and a return of the shard starts
// a new one (VirtualWorkspace).
func (w *AccessWatch) VirtualWorkspaceGone(url string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.configs, url)
	w.backoff.Forget(url)
	if vw := w.watches[url]; vw != nil {
		vw.stop()
		delete(w.watches, url)
	}
}

// tryWatch watches cfg's virtual workspace, or tries again after a backoff; w.mu
// held.
func (w *AccessWatch) tryWatch(cfg *rest.Config) {
	err := w.watch(cfg)
	if err == nil {
		w.backoff.Forget(cfg.Host)
		return
	}
	wait := w.backoff.When(cfg.Host)
	log.FromContext(w.ctx).Error(err, "watching the runtime's objects through a virtual workspace; retrying with backoff",
		"virtualWorkspace", cfg.Host, "attempts", w.backoff.NumRequeues(cfg.Host), "retryIn", wait)
	ctx := w.ctx
	time.AfterFunc(wait, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		// Only while this virtual workspace is still wanted, unwatched, and the
		// source runs.
		if ctx.Err() != nil || w.ctx != ctx || w.configs[cfg.Host] != cfg || w.watches[cfg.Host] != nil {
			return
		}
		w.tryWatch(cfg)
	})
}

// Source returns the controller's source of repair requests; lister lists the
// Service objects of a workspace.
func (w *AccessWatch) Source(lister engine.ClusterLister) source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.queue != nil {
			return fmt.Errorf("access watch started twice")
		}
		w.ctx, w.queue, w.lister = ctx, q, lister
		for _, cfg := range w.configs {
			w.tryWatch(cfg)
		}
		return nil
	})
}

// watch starts a wildcard cache of the watched types on cfg's virtual workspace; w.mu
// held.
func (w *AccessWatch) watch(cfg *rest.Config) error {
	// Managed fields are dropped from the cached copies: neither drift nor the Minter
	// reads them, and every replica holds these objects of every workspace.
	c, err := mcpcache.NewWildcardCache(cfg, cache.Options{Scheme: w.scheme, DefaultLabelSelector: w.selector,
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return fmt.Errorf("access watch of %s: %w", cfg.Host, err)
	}
	vw := &vwWatch{informers: map[reflect.Type]toolscache.SharedIndexInformer{}}
	namespaced := false
	for _, m := range w.minters {
		namespaced = namespaced || m.Namespaced()
	}
	for _, obj := range tokens.WatchedObjects(namespaced) {
		inf, err := c.GetInformer(w.ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("access watch of %T: %w", obj, err)
		}
		shared, _, _, err := c.GetSharedInformer(obj)
		if err != nil {
			return fmt.Errorf("access watch of %T: %w", obj, err)
		}
		vw.informers[reflect.TypeOf(obj)] = shared
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.changed(o, false) },
			UpdateFunc: func(_, o any) { w.changed(o, false) },
			DeleteFunc: func(o any) { w.changed(o, true) },
		}); err != nil {
			return fmt.Errorf("access watch of %T: %w", obj, err)
		}
	}
	// The informers run while the cache does: from here until the virtual workspace
	// goes (VirtualWorkspaceGone) or the source stops.
	ctx, stop := context.WithCancel(w.ctx)
	vw.stop = stop
	w.watches[cfg.Host] = vw
	go func() {
		if err := c.Start(ctx); err != nil {
			log.FromContext(ctx).Error(err, "access watch stopped", "virtualWorkspace", cfg.Host)
		}
	}()
	return nil
}

// changed queues the Service objects of the object's workspace when the object
// drifted.
func (w *AccessWatch) changed(o any, deleted bool) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = tomb.Obj, true
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	lc := logicalcluster.From(obj)
	drifted := false
	for _, m := range w.minters {
		// Each minter is told: only the one whose object it is reports drift.
		drifted = m.Drifted(lc, obj, deleted) || drifted
	}
	if !drifted {
		return
	}
	log.FromContext(w.ctx).V(1).Info("the worker's access changed in a workspace", "cluster", lc,
		"kind", fmt.Sprintf("%T", obj), "name", obj.GetName(), "deleted", deleted)
	for _, r := range w.lister.List(w.ctx, lc.String()) {
		w.queue.Add(r)
	}
}
