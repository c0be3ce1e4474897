package kcpprovider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// fakeWatch stands in for watching a virtual workspace: each URL fails as often as
// failures says, then starts, once its gate (if it has one) is closed: a test reads
// the state between the failures and the start however slowly the machine runs.
type fakeWatch struct {
	mu       sync.Mutex
	failures map[string]int
	attempts map[string]int
	stopped  map[string]bool
	gates    map[string]chan struct{}
}

func (f *fakeWatch) watch(ctx context.Context, url string, _ multicluster.Aware) (*endpoint, error) {
	f.mu.Lock()
	f.attempts[url]++
	if f.attempts[url] <= f.failures[url] {
		f.mu.Unlock()
		return nil, errors.New("failed to get server groups: the server could not find the requested resource")
	}
	gate := f.gates[url]
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stopped[url] = true
	})
	return &endpoint{url: url, ctx: ctx, cancel: cancel, engaged: map[logicalcluster.Name]bool{}}, nil
}

func (f *fakeWatch) get(m map[string]int, url string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[url]
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func gauges(name string) (published, watched float64) {
	return testutil.ToFloat64(metrics.KCPVirtualWorkspacesGauge.WithLabelValues(name, "published")),
		testutil.ToFloat64(metrics.KCPVirtualWorkspacesGauge.WithLabelValues(name, "watched"))
}

// TestUnwatchedVirtualWorkspaceIsRetried is the bug of a shard's virtual workspace
// published before it serves the export: the first attempts fail, and the provider
// keeps trying (reporting it meanwhile) until it is watched, without waiting for the
// endpoint slice to change again.
func TestUnwatchedVirtualWorkspaceIsRetried(t *testing.T) {
	const name = "retry-test"
	scheme := runtime.NewScheme()
	if err := apisv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	p, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, "widgets", Options{
		Scheme: scheme, Name: name, RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	const root, shard = "https://vw-root/services/apiexport/x/widgets", "https://vw-shard-1/services/apiexport/x/widgets"
	started := make(chan struct{})
	f := &fakeWatch{failures: map[string]int{shard: 3}, attempts: map[string]int{}, stopped: map[string]bool{},
		gates: map[string]chan struct{}{shard: started}}
	p.watch = f.watch
	var notified atomic.Int32
	p.Notify(func() { notified.Add(1) })

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p.next(ctx, nil) {
		}
	}()
	t.Cleanup(func() {
		cancel()
		p.queue.ShutDown()
		<-done
	})

	p.setPublished([]string{root, shard})
	eventually(t, "the shard reported unwatched", func() error {
		u := p.Unwatched()
		if len(u) != 1 || u[0].URL != shard || u[0].Err == nil {
			return fmt.Errorf("unwatched %v", u)
		}
		if pub, w := gauges(name); pub != 2 || w != 1 {
			return fmt.Errorf("gauges published %v watched %v", pub, w)
		}
		return nil
	})
	if notified.Load() == 0 {
		t.Error("Notify hook not called when the shard became unwatched")
	}
	close(started)
	eventually(t, "the shard watched after its failures", func() error {
		if u := p.Unwatched(); len(u) != 0 {
			return fmt.Errorf("unwatched %v", u)
		}
		if pub, w := gauges(name); pub != 2 || w != 2 {
			return fmt.Errorf("gauges published %v watched %v", pub, w)
		}
		return nil
	})
	if got := f.get(f.attempts, shard); got != 4 {
		t.Errorf("shard tried %d times, want 4 (3 failures, then watched)", got)
	}
	if got := f.get(f.attempts, root); got != 1 {
		t.Errorf("root tried %d times, want 1", got)
	}
	if notified.Load() < 2 {
		t.Errorf("Notify hook called %d times, want it told of the failure and the recovery", notified.Load())
	}

	t.Run("a URL that leaves the slice is stopped, and one failing is no longer tried", func(t *testing.T) {
		const gone = "https://vw-shard-2/services/apiexport/x/widgets"
		f.mu.Lock()
		f.failures[gone] = 1 << 30
		f.mu.Unlock()
		p.setPublished([]string{root, shard, gone})
		eventually(t, "the failing URL reported", func() error {
			if u := p.Unwatched(); len(u) != 1 || u[0].URL != gone {
				return fmt.Errorf("unwatched %v", u)
			}
			return nil
		})
		p.setPublished([]string{root})
		eventually(t, "the shard stopped", func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if !f.stopped[shard] {
				return errors.New("still running")
			}
			return nil
		})
		if u := p.Unwatched(); len(u) != 0 {
			t.Errorf("unwatched after the URLs left: %v", u)
		}
		if pub, w := gauges(name); pub != 1 || w != 1 {
			t.Errorf("gauges published %v watched %v, want 1 and 1", pub, w)
		}
		before := f.get(f.attempts, gone)
		// The backoff of the gone URL is at most RetryMax: wait past several of them.
		deadline := time.Now().Add(10 * p.opts.RetryMax)
		for time.Now().Before(deadline) {
			if n := f.get(f.attempts, gone); n > before+1 {
				t.Fatalf("a URL no longer published was tried %d more times", n-before)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestServesDividesVirtualWorkspaces: every published virtual workspace is watched,
// only those Options.Serves names are served, and Reassess applies a change of its
// answers: a newly served one keeps its watch, one no longer served is watched anew
// (its APIBindings only), so that its workspaces' watches go with the old cache.
func TestServesDividesVirtualWorkspaces(t *testing.T) {
	const name = "serves-test"
	const one, two = "https://vw-shard-1/services/apiexport/x/widgets", "https://vw-shard-2/services/apiexport/x/widgets"
	var mu sync.Mutex
	served := map[string]bool{one: true}
	scheme := runtime.NewScheme()
	if err := apisv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	p, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, "widgets", Options{
		Scheme: scheme, Name: name, RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		Serves: func(url string) bool {
			mu.Lock()
			defer mu.Unlock()
			return served[url]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeWatch{failures: map[string]int{}, attempts: map[string]int{}, stopped: map[string]bool{}}
	p.watch = func(ctx context.Context, url string, aware multicluster.Aware) (*endpoint, error) {
		ep, err := f.watch(ctx, url, aware)
		if ep != nil {
			ep.serving = p.serves(url)
			ep.bindings = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
		}
		return ep, err
	}
	ctx, cancel := context.WithCancel(t.Context())
	p.ctx, p.aware = ctx, noAware{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p.next(ctx, noAware{}) {
		}
	}()
	t.Cleanup(func() {
		cancel()
		p.queue.ShutDown()
		<-done
	})
	servedGauge := func() float64 {
		return testutil.ToFloat64(metrics.KCPVirtualWorkspacesGauge.WithLabelValues(name, "served"))
	}

	p.setPublished([]string{one, two})
	eventually(t, "both watched, one served", func() error {
		if pub, w := gauges(name); pub != 2 || w != 2 || servedGauge() != 1 {
			return fmt.Errorf("published %v watched %v served %v", pub, w, servedGauge())
		}
		return nil
	})

	mu.Lock()
	served = map[string]bool{two: true}
	mu.Unlock()
	p.Reassess()
	eventually(t, "the first watched anew, the second served", func() error {
		if got := f.get(f.attempts, one); got != 2 {
			return fmt.Errorf("the first watched %d times", got)
		}
		if _, w := gauges(name); w != 2 || servedGauge() != 1 {
			return fmt.Errorf("watched %v served %v", w, servedGauge())
		}
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped[one] {
		t.Error("the first virtual workspace's old watch still runs")
	}
	if f.attempts[two] != 1 || f.stopped[two] {
		t.Errorf("the second was watched %d times (stopped: %v), want once, its watch kept", f.attempts[two], f.stopped[two])
	}
	for _, ep := range p.watched() {
		if ep.isServing() != (ep.url == two) {
			t.Errorf("%s serving: %v", ep.url, ep.isServing())
		}
	}
}

// noAware engages nothing.
type noAware struct{}

func (noAware) Engage(context.Context, multicluster.ClusterName, cluster.Cluster) error { return nil }
