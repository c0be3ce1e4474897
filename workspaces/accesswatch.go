package workspaces

import (
	"context"
	"fmt"
	"sync"

	"github.com/kcp-dev/logicalcluster/v3"
	mcpcache "github.com/kcp-dev/multicluster-provider/pkg/cache"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

	mu      sync.Mutex
	configs []*rest.Config
	seen    map[string]bool // virtual workspace hosts
	ctx     context.Context
	queue   workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	lister  engine.ClusterLister
}

// NewAccessWatch returns an AccessWatch of the objects the minters keep (the
// provider's credential and, declared apart, its worker's), which carry managedBy.
func NewAccessWatch(scheme *runtime.Scheme, managedBy map[string]string, minters ...*tokens.Minter) *AccessWatch {
	return &AccessWatch{minters: minters, scheme: scheme, selector: labels.SelectorFromSet(managedBy), seen: map[string]bool{}}
}

// VirtualWorkspace is told of a virtual workspace (one per kcp shard); it watches it
// once the source runs.
func (w *AccessWatch) VirtualWorkspace(cfg *rest.Config) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[cfg.Host] {
		return nil
	}
	w.seen[cfg.Host] = true
	w.configs = append(w.configs, cfg)
	if w.queue == nil {
		return nil
	}
	return w.watch(cfg)
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
			if err := w.watch(cfg); err != nil {
				return err
			}
		}
		return nil
	})
}

// watch starts a wildcard cache of the watched types on cfg's virtual workspace; w.mu
// held.
func (w *AccessWatch) watch(cfg *rest.Config) error {
	ctx := w.ctx
	c, err := mcpcache.NewWildcardCache(cfg, cache.Options{Scheme: w.scheme, DefaultLabelSelector: w.selector})
	if err != nil {
		return fmt.Errorf("access watch of %s: %w", cfg.Host, err)
	}
	for _, obj := range tokens.WatchedObjects() {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("access watch of %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.changed(o, false) },
			UpdateFunc: func(_, o any) { w.changed(o, false) },
			DeleteFunc: func(o any) { w.changed(o, true) },
		}); err != nil {
			return fmt.Errorf("access watch of %T: %w", obj, err)
		}
	}
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
