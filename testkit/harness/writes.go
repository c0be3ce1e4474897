package harness

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
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
