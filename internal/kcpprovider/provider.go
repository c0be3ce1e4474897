// One file, one idea: the provider's endpoint bookkeeping (which virtual-workspace
// URLs are published, watched or retried, and the workspaces engaged through each) is
// one state machine behind one lock; splitting it would spread that lock.

package kcpprovider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	kcpcache "github.com/kcp-dev/apimachinery/v2/pkg/cache"
	"github.com/kcp-dev/logicalcluster/v3"
	mcpcache "github.com/kcp-dev/multicluster-provider/pkg/cache"
	mcrecorder "github.com/kcp-dev/multicluster-provider/pkg/events/recorder"
	mcpprovider "github.com/kcp-dev/multicluster-provider/pkg/provider"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	conditionsv1alpha1 "github.com/kcp-dev/sdk/apis/third_party/conditions/apis/conditions/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/multicluster-runtime/pkg/clusters"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// Options configure a Provider.
type Options struct {
	// Scheme knows kcp's APIs and the types the engaged workspaces are read with.
	Scheme *runtime.Scheme
	// NewCluster makes the cluster of one bound workspace on the wildcard cache of
	// its virtual workspace. Default: kcp's scoped cluster.
	NewCluster mcpprovider.NewClusterFunc
	// Endpoints, if set, is told the endpoint slice's URLs on every change of the
	// slice, before a virtual workspace that left it is stopped.
	Endpoints func(urls []string)
	// Name is the provider's name, the label of the metrics.
	Name string
	// Serves, if set, says whether this process serves the workspaces of the
	// virtual workspace at url; replicas that divide the shards among them set it
	// (docs/design/replicas.md). The APIBindings of every published virtual
	// workspace are watched all the same, so that ShardOf knows every bound
	// workspace, but only the workspaces of a served one are engaged, and only
	// there do the engaged workspaces' watches run. Call Reassess when its answers
	// change. Default: every virtual workspace is served.
	Serves func(url string) bool
	// RetryMin and RetryMax bound the backoff of a virtual workspace that could not
	// be watched and of a workspace that could not be engaged. Defaults: 1 s, 30 s.
	RetryMin, RetryMax time.Duration
}

// Unwatched is a virtual workspace the endpoint slice lists that is not watched: its
// tenants are not served until it is.
type Unwatched struct {
	URL string
	// Err is why the last attempt failed.
	Err error
}

// Provider engages the workspaces bound to an APIExport (a multicluster.Provider).
type Provider struct {
	opts      Options
	slice     *apisv1alpha1.APIExportEndpointSlice
	cache     cache.Cache // of the one endpoint slice
	cfg       *rest.Config
	log       logr.Logger
	clusters  clusters.Clusters[cluster.Cluster]
	recorders *mcrecorder.Manager
	// queue holds what to try again: a virtual workspace to watch (key.cluster
	// empty), or a workspace to engage.
	queue workqueue.TypedRateLimitingInterface[key]
	// watch starts watching the virtual workspace at url (watchEndpoint; tests
	// replace it).
	watch func(ctx context.Context, url string, aware multicluster.Aware) (*endpoint, error)

	mu sync.Mutex
	// ctx and aware are Start's, for Reassess; aware is nil before Start.
	ctx       context.Context
	aware     multicluster.Aware
	published []string
	endpoints map[string]*endpoint // watched, by URL
	failed    map[string]error     // published and not watched: the last error, by URL
	notify    []func()
}

// key is an item of the retry queue.
type key struct {
	url     string
	cluster logicalcluster.Name
}

var _ multicluster.Provider = &Provider{}

// New returns a Provider of the workspaces bound through the APIExportEndpointSlice
// endpointSlice of the workspace cfg points at. cfg's credentials are used for the
// virtual workspaces too.
func New(cfg *rest.Config, endpointSlice string, opts Options) (*Provider, error) {
	if opts.NewCluster == nil {
		opts.NewCluster = mcpcache.NewScopedCluster
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 30 * time.Second
	}
	slice := &apisv1alpha1.APIExportEndpointSlice{}
	// The one type this cache holds is known: no discovery of the provider workspace.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(apisv1alpha1.SchemeGroupVersion.WithKind("APIExportEndpointSlice"), meta.RESTScopeRoot)
	c, err := cache.New(cfg, cache.Options{Scheme: opts.Scheme, Mapper: mapper, ByObject: map[client.Object]cache.ByObject{
		slice: {Field: fields.OneTermEqualSelector("metadata.name", endpointSlice)},
	}})
	if err != nil {
		return nil, fmt.Errorf("cache of APIExportEndpointSlice %s: %w", endpointSlice, err)
	}
	logger := log.Log.WithName("kcp-apiexport-cluster-provider")
	p := &Provider{
		opts: opts, slice: slice, cache: c, cfg: cfg, log: logger,
		clusters:  clusters.New[cluster.Cluster](),
		recorders: mcrecorder.NewManager(opts.Scheme, logger.WithName("recorders")),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](opts.RetryMin, opts.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "kcp-virtual-workspaces"}),
		endpoints: map[string]*endpoint{}, failed: map[string]error{},
	}
	p.watch = p.watchEndpoint
	return p, nil
}

// WaitForCacheSync waits until the wildcard cache of every watched virtual workspace
// has synced each informer it holds (the APIBindings', and the Service API's once a
// workspace is engaged), and reports whether they did before ctx ended. After a
// schema change the Service informers list through the new schema first, so a replica
// that waits for this before it reports ready serves the new schema when it does.
func (p *Provider) WaitForCacheSync(ctx context.Context) bool {
	for _, ep := range p.watched() {
		if !ep.wildcard.WaitForCacheSync(ctx) {
			return false
		}
	}
	return true
}

// Get returns an engaged workspace.
func (p *Provider) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return p.clusters.Get(ctx, name)
}

// IndexField adds an index to every engaged workspace, and to those engaged later.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	return p.clusters.IndexField(ctx, obj, field, extract)
}

// Notify makes the Provider call f whenever the set of virtual workspaces it could
// not watch changes (see Unwatched). Call it before Start.
func (p *Provider) Notify(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = append(p.notify, f)
}

// Unwatched returns the virtual workspaces the endpoint slice lists whose last
// attempt to be watched failed, by URL. A URL waiting for its first attempt is not
// among them.
func (p *Provider) Unwatched() []Unwatched {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Unwatched, 0, len(p.failed))
	for url, err := range p.failed {
		out = append(out, Unwatched{URL: url, Err: err})
	}
	slices.SortFunc(out, func(a, b Unwatched) int { return strings.Compare(a.URL, b.URL) })
	return out
}

// Start follows the endpoint slice until ctx ends: it watches each virtual workspace
// the slice lists and engages each workspace whose APIBinding there is ready.
func (p *Provider) Start(ctx context.Context, aware multicluster.Aware) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	p.ctx, p.aware = ctx, aware
	p.mu.Unlock()
	inf, err := p.cache.GetInformer(ctx, p.slice, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("informer of the APIExportEndpointSlice: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.sliceChanged(o) },
		UpdateFunc: func(_, o any) { p.sliceChanged(o) },
		DeleteFunc: func(any) { p.setPublished(nil) },
	})
	if err != nil {
		return fmt.Errorf("handler of the APIExportEndpointSlice: %w", err)
	}
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		for p.next(ctx, aware) {
		}
	}()
	defer func() {
		_ = inf.RemoveEventHandler(reg)
		p.queue.ShutDown()
		<-workerDone
		p.setPublished(nil)
		stopCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer stop()
		p.recorders.Stop(stopCtx)
	}()
	p.log.Info("starting provider")
	return p.cache.Start(ctx)
}

func (p *Provider) sliceChanged(o any) {
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	urls, err := mcpprovider.DefaultExtractURLsFromEndpointSlice(obj)
	if err != nil {
		p.log.Error(err, "reading the virtual workspace URLs of the APIExportEndpointSlice", "name", obj.GetName())
		return
	}
	p.setPublished(urls)
}

// setPublished makes urls the virtual workspaces to watch: those that left are
// stopped, new ones queued.
func (p *Provider) setPublished(urls []string) {
	if p.opts.Endpoints != nil {
		p.opts.Endpoints(urls)
	}
	p.mu.Lock()
	p.published = slices.Clone(urls)
	var stopped []*endpoint
	for url, ep := range p.endpoints {
		if !slices.Contains(urls, url) {
			delete(p.endpoints, url)
			stopped = append(stopped, ep)
		}
	}
	changed := false
	for url := range p.failed {
		if !slices.Contains(urls, url) {
			delete(p.failed, url)
			changed = true
		}
	}
	for _, url := range urls {
		if p.endpoints[url] == nil {
			p.queue.Add(key{url: url})
		}
	}
	p.mu.Unlock()
	for _, ep := range stopped {
		p.log.Info("virtual workspace left the endpoint slice; stopped watching it", "url", ep.url)
		p.stopEndpoint(ep)
	}
	p.changed(changed)
	// A shard joining or leaving can move the others between the replicas.
	p.Reassess()
}

// next handles one item of the retry queue; false once the queue shut down.
func (p *Provider) next(ctx context.Context, aware multicluster.Aware) bool {
	k, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(k)
	var err error
	if k.cluster == "" {
		err = p.startEndpoint(ctx, aware, k.url)
	} else {
		err = p.engageAgain(ctx, aware, k)
	}
	if err == nil || ctx.Err() != nil {
		p.queue.Forget(k)
		return true
	}
	p.queue.AddRateLimited(k)
	// The backoff keeps this line's rate down: it doubles up to RetryMax.
	what := "a virtual workspace of the endpoint slice cannot be watched yet; retrying with backoff"
	if k.cluster != "" {
		what = "a bound workspace cannot be engaged yet; retrying with backoff"
	}
	p.log.Error(err, what, "url", k.url, "cluster", k.cluster, "attempts", p.queue.NumRequeues(k))
	return true
}

// startEndpoint watches the virtual workspace at url, if it is still listed and not
// watched yet.
func (p *Provider) startEndpoint(ctx context.Context, aware multicluster.Aware, url string) error {
	p.mu.Lock()
	wanted := slices.Contains(p.published, url) && p.endpoints[url] == nil
	p.mu.Unlock()
	if !wanted {
		return nil
	}
	ep, err := p.watch(ctx, url, aware)
	p.mu.Lock()
	published := slices.Contains(p.published, url)
	_, wasFailed := p.failed[url]
	switch {
	case !published:
		// It left the slice meanwhile.
		delete(p.failed, url)
	case err != nil:
		p.failed[url] = err
	default:
		delete(p.failed, url)
		p.endpoints[url] = ep
	}
	_, isFailed := p.failed[url]
	p.mu.Unlock()
	if err == nil && !published {
		p.stopEndpoint(ep)
	}
	if err == nil && published {
		p.log.Info("watching virtual workspace", "url", url)
		// Serves may have changed its answer while the watch started, after the
		// endpoint took the old one and before Reassess could see it.
		p.Reassess()
	}
	p.changed(wasFailed != isFailed)
	if published {
		return err
	}
	return nil
}

// endpointFailed is told that ep's cache stopped with err while it should run: it is
// watched again after a backoff.
func (p *Provider) endpointFailed(ep *endpoint, err error) {
	p.mu.Lock()
	current := p.endpoints[ep.url] == ep
	if current {
		delete(p.endpoints, ep.url)
		p.failed[ep.url] = fmt.Errorf("watch of virtual workspace %s stopped: %w", ep.url, err)
		p.queue.AddRateLimited(key{url: ep.url})
	}
	p.mu.Unlock()
	if current {
		p.log.Error(err, "watch of a virtual workspace stopped; retrying with backoff", "url", ep.url)
		p.stopEndpoint(ep)
		p.changed(true)
	}
}

// changed updates the metrics and, when the set of unwatched virtual workspaces
// changed, calls the Notify hooks.
func (p *Provider) changed(unwatchedChanged bool) {
	p.mu.Lock()
	published, watched, served := len(p.published), len(p.endpoints), 0
	for _, ep := range p.endpoints {
		if ep.isServing() {
			served++
		}
	}
	hooks := slices.Clone(p.notify)
	p.mu.Unlock()
	metrics.KCPVirtualWorkspaces(p.opts.Name, published, watched, served)
	if unwatchedChanged {
		for _, f := range hooks {
			f()
		}
	}
}

// engageAgain retries engaging k.cluster, if its virtual workspace is still watched
// and holds a ready APIBinding of it.
func (p *Provider) engageAgain(ctx context.Context, aware multicluster.Aware, k key) error {
	p.mu.Lock()
	ep := p.endpoints[k.url]
	p.mu.Unlock()
	if ep == nil || !ep.isServing() || !ep.readyBinding(k.cluster) {
		return nil
	}
	return p.engage(ctx, aware, ep, k.cluster)
}

// engage engages the workspace name of ep, unless it is engaged.
func (p *Provider) engage(ctx context.Context, aware multicluster.Aware, ep *endpoint, name logicalcluster.Name) error {
	mcName := multicluster.ClusterName(name.String())
	if _, err := p.clusters.Get(ctx, mcName); err == nil {
		return nil
	}
	recorder, err := p.recorders.GetProvider(ep.cfg, name)
	if err != nil {
		return fmt.Errorf("event recorder of workspace %s: %w", name, err)
	}
	cl, err := p.opts.NewCluster(ep.cfg, name, ep.wildcard, p.opts.Scheme, recorder)
	if err != nil {
		return fmt.Errorf("cluster of workspace %s: %w", name, err)
	}
	ep.track(name)
	// The workspace's cluster runs while its virtual workspace is watched.
	if err := p.clusters.Add(ep.ctx, mcName, cl, aware); err != nil {
		return fmt.Errorf("engaging workspace %s: %w", name, err)
	}
	return nil
}

// bindingChanged engages the workspace of a ready APIBinding; a failure is retried.
func (p *Provider) bindingChanged(ctx context.Context, aware multicluster.Aware, ep *endpoint, o any) {
	obj, ok := o.(client.Object)
	if !ok || !isReady(obj) || !ep.isServing() {
		return
	}
	name := logicalcluster.From(obj)
	if err := p.engage(ctx, aware, ep, name); err != nil {
		p.log.Error(err, "engaging a workspace; retrying with backoff", "url", ep.url, "cluster", name)
		p.queue.AddRateLimited(key{url: ep.url, cluster: name})
	}
}

// bindingGone disengages the workspace of a deleted APIBinding once it has none
// left.
func (p *Provider) bindingGone(ctx context.Context, ep *endpoint, o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	name := logicalcluster.From(obj)
	if keys, err := ep.bindings.IndexKeys(kcpcache.ClusterIndexName, name.String()); err != nil || len(keys) > 0 {
		return
	}
	ep.untrack(name)
	p.recorders.StopProvider(ctx, name)
	p.clusters.Remove(multicluster.ClusterName(name.String()))
}

// stopEndpoint stops watching ep; its workspaces' clusters stop with it.
func (p *Provider) stopEndpoint(ep *endpoint) {
	ep.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The clusters stop with ep's context and leave the set when they have; removed
	// here at once, a workspace engaged again right after is not taken for engaged.
	for _, name := range ep.untrackAll() {
		p.recorders.StopProvider(ctx, name)
		p.clusters.Remove(multicluster.ClusterName(name.String()))
	}
}

// isReady says whether an APIBinding has a Ready condition that is True. The
// coordinator asks it, through ShardOf, about every engaged workspace on each of its
// decisions, and it decides once more for every workspace engaged: hundreds of
// thousands of times while a replica takes over a shard of hundreds. The typed
// binding's conditions are read as they are; the kcp provider's generic check (kept
// for anything else) converts the whole object to unstructured first, which is most
// of a decision's cost (BenchmarkIsReady).
func isReady(obj client.Object) bool {
	b, ok := obj.(*apisv1alpha1.APIBinding)
	if !ok {
		return anyReady(obj)
	}
	return slices.ContainsFunc(b.Status.Conditions, func(c conditionsv1alpha1.Condition) bool {
		return c.Type == conditionsv1alpha1.ReadyCondition && c.Status == corev1.ConditionTrue
	})
}

var anyReady = func() func(client.Object) bool {
	ready := mcpprovider.ConditionReadyFunc(string(conditionsv1alpha1.ReadyCondition))
	return func(obj client.Object) bool {
		ok, err := ready(obj)
		return err == nil && ok
	}
}()

// endpoint is one watched virtual workspace.
type endpoint struct {
	url      string
	cfg      *rest.Config
	ctx      context.Context
	cancel   context.CancelFunc
	wildcard mcpcache.WildcardCache
	// bindings is the informer store of the APIBindings there.
	bindings toolscache.Indexer

	mu sync.Mutex
	// serving: its workspaces are engaged (Options.Serves).
	serving bool
	// engaged are the workspaces engaged through it, whose event recorders stop
	// with it.
	engaged map[logicalcluster.Name]bool
}

func (ep *endpoint) isServing() bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.serving
}

// watchEndpoint starts the wildcard cache of the virtual workspace at url with an
// informer of its APIBindings, which engage and disengage workspaces.
func (p *Provider) watchEndpoint(ctx context.Context, url string, aware multicluster.Aware) (*endpoint, error) {
	cfg := rest.CopyConfig(p.cfg)
	cfg.Host = url
	// Nothing reads the managed fields of what these caches hold (the Service objects,
	// the APIBindings, the runtime's objects in the workspaces): kept, they were a
	// good part of each cached object.
	wildcard, err := mcpcache.NewWildcardCache(cfg, cache.Options{Scheme: p.opts.Scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, fmt.Errorf("wildcard cache of virtual workspace %s: %w", url, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	ep := &endpoint{url: url, cfg: cfg, ctx: ctx, cancel: cancel, wildcard: wildcard, engaged: map[logicalcluster.Name]bool{},
		serving: p.serves(url)}
	binding := &apisv1alpha1.APIBinding{}
	// The first request to the virtual workspace: discovery, which fails while kcp
	// does not serve the export there yet.
	inf, err := wildcard.GetInformer(ctx, binding, cache.BlockUntilSynced(false))
	if err == nil {
		var shared toolscache.SharedIndexInformer
		if shared, _, _, err = wildcard.GetSharedInformer(binding); err == nil {
			ep.bindings = shared.GetIndexer()
			_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(o any) { p.bindingChanged(ctx, aware, ep, o) },
				UpdateFunc: func(_, o any) { p.bindingChanged(ctx, aware, ep, o) },
				DeleteFunc: func(o any) { p.bindingGone(ctx, ep, o) },
			})
		}
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching APIBindings through virtual workspace %s: %w", url, err)
	}
	go func() {
		err := wildcard.Start(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("cache ended")
		}
		p.endpointFailed(ep, err)
	}()
	return ep, nil
}

// readyBinding says whether the virtual workspace holds a ready APIBinding of the
// workspace name.
func (ep *endpoint) readyBinding(name logicalcluster.Name) bool {
	items, err := ep.bindings.ByIndex(kcpcache.ClusterIndexName, name.String())
	if err != nil {
		return false
	}
	for _, item := range items {
		if obj, ok := item.(client.Object); ok && isReady(obj) {
			return true
		}
	}
	return false
}

func (ep *endpoint) track(name logicalcluster.Name) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.engaged[name] = true
}

func (ep *endpoint) untrack(name logicalcluster.Name) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	delete(ep.engaged, name)
}

func (ep *endpoint) untrackAll() []logicalcluster.Name {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	names := make([]logicalcluster.Name, 0, len(ep.engaged))
	for name := range ep.engaged {
		names = append(names, name)
	}
	ep.engaged = map[logicalcluster.Name]bool{}
	return names
}

// SetServes sets Options.Serves; call it before Start.
func (p *Provider) SetServes(serves func(url string) bool) { p.opts.Serves = serves }

func (p *Provider) serves(url string) bool { return p.opts.Serves == nil || p.opts.Serves(url) }

// watched returns the watched virtual workspaces.
func (p *Provider) watched() []*endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	eps := make([]*endpoint, 0, len(p.endpoints))
	for _, ep := range p.endpoints {
		eps = append(eps, ep)
	}
	return eps
}

// Published returns the virtual workspace URLs the endpoint slice lists.
func (p *Provider) Published() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.published)
}

// ShardOf returns the URL of the watched virtual workspace that holds a ready
// APIBinding of the workspace, served here or not.
func (p *Provider) ShardOf(workspace string) (string, bool) {
	for _, ep := range p.watched() {
		if ep.readyBinding(logicalcluster.Name(workspace)) {
			return ep.url, true
		}
	}
	return "", false
}

// Reassess asks Options.Serves again for every watched virtual workspace: one newly
// served has its bound workspaces engaged; one no longer served is watched anew,
// its APIBindings only, so that its workspaces disengage and the memory of their
// watches goes with the old cache.
func (p *Provider) Reassess() {
	p.mu.Lock()
	ctx, aware := p.ctx, p.aware
	p.mu.Unlock()
	if aware == nil {
		return
	}
	for _, ep := range p.watched() {
		want := p.serves(ep.url)
		ep.mu.Lock()
		was := ep.serving
		ep.serving = want
		ep.mu.Unlock()
		switch {
		case want && !was:
			p.log.Info("serving the workspaces of a virtual workspace", "url", ep.url)
			for _, o := range ep.bindings.List() {
				p.bindingChanged(ctx, aware, ep, o)
			}
		case !want && was:
			p.log.Info("no longer serving the workspaces of a virtual workspace; watching its APIBindings only", "url", ep.url)
			p.rewatch(ep)
		}
	}
	p.changed(false)
}

// rewatch stops ep and queues its URL to be watched anew.
func (p *Provider) rewatch(ep *endpoint) {
	p.mu.Lock()
	current := p.endpoints[ep.url] == ep
	if current {
		delete(p.endpoints, ep.url)
		p.queue.Add(key{url: ep.url})
	}
	p.mu.Unlock()
	if !current {
		return
	}
	p.stopEndpoint(ep)
}
