package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	kcpcorev1alpha1 "github.com/kcp-dev/sdk/apis/core/v1alpha1"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

const (
	providerName = "widgets"
	// concurrency is the runtime's work-queue concurrency (builder's default), and
	// the floor client's and the tenants' creation concurrency.
	concurrency = 8
)

func benchScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme, widget.AddToScheme, apisv1alpha1.AddToScheme, apisv1alpha2.AddToScheme, kcpcorev1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// fast raises a config's client-side rate limits: the benchmark's own clients and
// the local platform must never be what the runtime waits for.
func fast(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 1000, 2000
	return c
}

// parallel calls fn(i) for i in [0,n) with at most c at once and returns the first
// error.
func parallel(n, c int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, c)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// readyWatcher records when each object was first seen Ready for its generation,
// from a watch of its own (not counted as the runtime's requests), and when it was
// first seen at all.
type readyWatcher struct {
	mu    sync.Mutex
	ready map[string]time.Time
	seen  map[string]time.Time
	n     chan struct{}
}

// watchReady lists and watches Widgets with cfg (a cluster, or a kcp virtual
// workspace at /clusters/*), keying them by kcp cluster annotation and name.
func watchReady(ctx context.Context, cfgs ...*rest.Config) (*readyWatcher, error) {
	return watchReadyOf(ctx, widget.GroupVersion.WithResource("widgets"), cfgs...)
}

// watchReadyOf is watchReady for any resource whose status has observedGeneration
// and a Ready condition (Service objects, Flux's HelmReleases).
func watchReadyOf(ctx context.Context, gvr schema.GroupVersionResource, cfgs ...*rest.Config) (*readyWatcher, error) {
	w := &readyWatcher{ready: map[string]time.Time{}, seen: map[string]time.Time{}, n: make(chan struct{}, 1)}
	handle := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		key := u.GetAnnotations()["kcp.io/cluster"] + "/" + u.GetNamespace() + "/" + u.GetName()
		now := time.Now()
		w.mu.Lock()
		if _, seen := w.seen[key]; !seen {
			w.seen[key] = now
		}
		ready := isReady(u)
		if _, seen := w.ready[key]; ready && !seen {
			w.ready[key] = now
		}
		w.mu.Unlock()
		if !ready {
			return
		}
		select {
		case w.n <- struct{}{}:
		default:
		}
	}
	// One informer per config: a kcp of several shards has a virtual workspace each.
	for _, cfg := range cfgs {
		dyn, err := dynamic.NewForConfig(fast(cfg))
		if err != nil {
			return nil, err
		}
		ri := dyn.Resource(gvr)
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return ri.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return ri.Watch(ctx, o)
			},
		}
		inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    handle,
			UpdateFunc: func(_, o any) { handle(o) },
		}); err != nil {
			return nil, err
		}
		go inf.RunWithContext(ctx)
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil, fmt.Errorf("ready watcher did not sync")
		}
	}
	return w, nil
}

func isReady(u *unstructured.Unstructured) bool {
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if og != u.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// forget drops the Ready times of keys: each counts again when it is next seen Ready
// (status caught up with its generation).
func (w *readyWatcher) forget(keys []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		delete(w.ready, k)
	}
}

// waitAll waits until n objects are Ready and returns their Ready times by key.
func (w *readyWatcher) waitAll(ctx context.Context, n int, timeout time.Duration) (map[string]time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		w.mu.Lock()
		got := len(w.ready)
		w.mu.Unlock()
		if got >= n {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d objects Ready within %s", got, n, timeout)
		case <-w.n:
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.ready))
	for k, v := range w.ready {
		out[k] = v
	}
	return out, nil
}

// firstSeen returns when each object was first seen, by key.
func (w *readyWatcher) firstSeen() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.seen))
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

// latencies pairs creation and Ready times by key.
func latencies(created, ready map[string]time.Time) []time.Duration {
	var out []time.Duration
	for k, c := range created {
		if r, ok := ready[k]; ok {
			out = append(out, r.Sub(c))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func lastOf(m map[string]time.Time) time.Time {
	var t time.Time
	for _, v := range m {
		if v.After(t) {
			t = v
		}
	}
	return t
}
