package harness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// WholeObjectUpdates fails t, at its end, when a client wrapped by the returned
// WrapTransport (builder.Options.WrapTransport) sent an update (PUT) of an object of
// resource or of its status. The runtime writes a Service object only as merge patches
// of the fields it owns, so that a replica whose Go type lacks a newer field (an older
// release during a rollout) never sends the object without it.
func WholeObjectUpdates(t testing.TB, resource string) func(http.RoundTripper) http.RoundTripper {
	var mu sync.Mutex
	var puts []string
	patches := 0
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		t.Logf("writes of %s by the runtime: %d patches, %d whole-object updates", resource, patches, len(puts))
		if len(puts) > 0 {
			t.Errorf("the runtime sent %d whole-object update(s) of %s instead of patches, the first: %s", len(puts), resource, puts[0])
		}
	})
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if updatesResource(req.URL.Path, resource) {
				mu.Lock()
				switch req.Method {
				case http.MethodPut:
					puts = append(puts, fmt.Sprintf("PUT %s", req.URL.Path))
				case http.MethodPatch:
					patches++
				}
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
}

// updatesResource says whether path names one object of resource, or its status:
// .../<resource>/<name> or .../<resource>/<name>/status.
func updatesResource(path, resource string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	n := len(parts)
	switch {
	case n >= 2 && parts[n-2] == resource:
		return true
	case n >= 3 && parts[n-1] == "status" && parts[n-3] == resource:
		return true
	}
	return false
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TenantWrites is a tenant writing at its own pace while a test changes what serves
// it; Stop ends it and says how it went.
type TenantWrites struct {
	stop           chan struct{}
	done           chan struct{}
	writes, failed atomic.Int64
	firstFailure   atomic.Value
}

// StartTenantWrites calls write(ctx, i) for i = 0, 1, ... every interval until Stop.
func StartTenantWrites(ctx context.Context, interval time.Duration, write func(ctx context.Context, i int) error) *TenantWrites {
	w := &TenantWrites{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval) // the tenant's pace
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			w.writes.Add(1)
			if err := write(ctx, i); err != nil {
				w.failed.Add(1)
				w.firstFailure.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	return w
}

// Failed is how many writes failed so far.
func (w *TenantWrites) Failed() int64 { return w.failed.Load() }

// Stop ends the writes, logs how many there were, and fails t if any failed.
func (w *TenantWrites) Stop(t testing.TB) {
	t.Helper()
	close(w.stop)
	<-w.done
	t.Logf("tenant writes: %d, failed: %d", w.writes.Load(), w.failed.Load())
	if n := w.failed.Load(); n > 0 {
		t.Errorf("%d tenant writes failed, the first: %v", n, w.firstFailure.Load())
	}
}

// WithVersions makes crd serve each of names with the schema of its first version,
// storage the stored one, and returns it.
func WithVersions(crd *apiextensionsv1.CustomResourceDefinition, storage string, names ...string) *apiextensionsv1.CustomResourceDefinition {
	first := crd.Spec.Versions[0]
	crd.Spec.Versions = nil
	for _, n := range names {
		v := *first.DeepCopy()
		v.Name, v.Storage = n, n == storage
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	return crd
}

// CountRequests is a WrapTransport counting every request through it in n.
func CountRequests(n *atomic.Int64) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			n.Add(1)
			return rt.RoundTrip(req)
		})
	}
}
