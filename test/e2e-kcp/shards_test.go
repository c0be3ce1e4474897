package e2ekcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestShardJoinsAndLeaves serves a kcp of two shards while the second shard's
// virtual workspace joins the endpoint slice (its first binding), leaves it (its last
// binding gone) and joins again: the tenants there are served each time, including
// the repair of their credentials, and the root shard's tenant throughout.
func TestShardJoinsAndLeaves(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	logRuntimeOnFailure(t, 150)
	e := startKCPEnvOn(ctx, t, sharedPlatform2, builder.Options{})
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	bind := func(name, shard string) tenant {
		tn := bindOnShard(ctx, t, e, name, shard, main.Name)
		waitReady(ctx, t, tn.c, main)
		wantConfigMap(ctx, t, e.wl, tn.lc, "hello", "blue")
		return tn
	}
	wantEndpoints := func(n int) {
		t.Helper()
		harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("%d virtual workspace URLs in the endpoint slice", n), func(ctx context.Context) error {
			urls, err := e.k.KCP.VirtualWorkspaceURLs(ctx, e.providerWS, e.name)
			if err != nil {
				return err
			}
			if len(urls) != n {
				return fmt.Errorf("%v", urls)
			}
			return nil
		})
	}
	// repaired deletes the tenant's workload ServiceAccount and waits for the
	// runtime to put it back: the access watch of the tenant's shard works.
	repaired := func(tn tenant) {
		t.Helper()
		key := types.NamespacedName{Namespace: "default", Name: e.name + "-workload"}
		sa := &corev1.ServiceAccount{}
		if err := tn.c.Get(ctx, key, sa); err != nil {
			t.Fatal(err)
		}
		old := sa.UID
		if err := tn.c.Delete(ctx, sa); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(ctx, t, 30*time.Second, "ServiceAccount "+key.Name+" recreated in "+tn.path.String(), func(ctx context.Context) error {
			if err := tn.c.Get(ctx, key, sa); err != nil {
				return err
			}
			if sa.UID == old {
				return fmt.Errorf("still the deleted one")
			}
			return nil
		})
	}

	onRoot := bind("on-root", localenv.ShardName(0))
	wantEndpoints(1)

	t.Run("a shard joining the endpoint slice is served", func(t *testing.T) {
		first := bind("on-shard-1", localenv.ShardName(1))
		wantEndpoints(2)
		repaired(first)

		t.Run("and leaving it stops nothing else", func(t *testing.T) {
			harness.DeleteAndWait(ctx, t, first.c, widgetAt(main))
			if err := first.c.Delete(ctx, &apisv1alpha2.APIBinding{ObjectMeta: metav1.ObjectMeta{Name: e.name}}); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(ctx, t, time.Minute, "binding gone", func(ctx context.Context) error {
				err := first.c.Get(ctx, client.ObjectKey{Name: e.name}, &apisv1alpha2.APIBinding{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("binding: %v", err)
			})
			wantEndpoints(1)
			harness.Eventually(ctx, t, time.Minute, "no platform requests of the deleted tenant", func(ctx context.Context) error {
				if n := platformRequests(ctx, t, e.pf, first.lc); n != 0 {
					return fmt.Errorf("%d left", n)
				}
				return nil
			})
			harness.Patch(ctx, t, onRoot.c, main, func(w *widget.Widget) { w.Spec.Color = "green" })
			wantConfigMap(ctx, t, e.wl, onRoot.lc, "hello", "green")
		})

		t.Run("and joining again is served again", func(t *testing.T) {
			again := bind("again-on-shard-1", localenv.ShardName(1))
			wantEndpoints(2)
			repaired(again)
			repaired(onRoot)
		})
	})
}

// TestVirtualWorkspaceServedOnceReady is kcp publishing a shard's virtual workspace
// in the endpoint slice before that virtual workspace serves the export (its
// discovery answers 404 meanwhile, as kcp's does): the runtime says so (the
// ProviderConfig's KCPMode condition, the virtual-workspace gauges, readiness), keeps
// serving the root shard's tenant, and serves the shard's tenant once its virtual
// workspace answers, without the endpoint slice changing again.
func TestVirtualWorkspaceServedOnceReady(t *testing.T) {
	t.Parallel() // on the shared platform, as a provider of its own
	ctx := t.Context()
	logRuntimeOnFailure(t, 150)
	fault := &vwNotServing{}
	fault.on.Store(true)
	ports, err := localenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	probes := fmt.Sprintf("127.0.0.1:%d", ports[0])
	e := startKCPEnvOn(ctx, t, sharedPlatform2, builder.Options{WrapTransport: fault.wrap, HealthProbeBindAddress: probes})
	shardURL, err := url.Parse(e.k.ShardConfig(1).Host)
	if err != nil {
		t.Fatal(err)
	}
	fault.host.Store(shardURL.Host)
	main := client.ObjectKey{Namespace: "default", Name: "main"}
	bind := func(name, shard string) tenant { return bindOnShard(ctx, t, e, name, shard, main.Name) }
	onRoot := bind("on-root", localenv.ShardName(0))
	waitReady(ctx, t, onRoot.c, main)
	wantProbeStatus(ctx, t, probes, http.StatusOK)

	onShard := bind("on-shard-1", localenv.ShardName(1))
	var shardVW string
	harness.Eventually(ctx, t, time.Minute, "the shard's virtual workspace in the endpoint slice", func(ctx context.Context) error {
		urls, err := e.k.KCP.VirtualWorkspaceURLs(ctx, e.providerWS, e.name)
		if err != nil {
			return err
		}
		for _, u := range urls {
			if parsed, err := url.Parse(u); err == nil && parsed.Host == shardURL.Host {
				shardVW = u
				return nil
			}
		}
		return fmt.Errorf("no URL of shard %s among %v", shardURL.Host, urls)
	})

	t.Run("while it does not serve the export, the runtime says so and serves the others", func(t *testing.T) {
		c := waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonVirtualWorkspaceNotWatched)
		if !strings.Contains(c.Message, shardVW) {
			t.Errorf("KCPMode message does not name the virtual workspace %s: %s", shardVW, c.Message)
		}
		wantConfigEvent(ctx, t, e.pf, e.name, corev1.EventTypeWarning, v1alpha1.ReasonVirtualWorkspaceNotWatched)
		wantVirtualWorkspaces(ctx, t, e, 2, 1)
		body := wantProbeStatus(ctx, t, probes, http.StatusInternalServerError)
		if !strings.Contains(body, "[-]kcp failed") {
			t.Errorf("readiness does not fail on kcp mode:\n%s", body)
		}
		if err := readyErr(ctx, onShard.c, main); err == nil {
			t.Error("the shard's tenant is Ready while its virtual workspace is not watched")
		}
		harness.Patch(ctx, t, onRoot.c, main, func(w *widget.Widget) { w.Spec.Color = "green" })
		wantConfigMap(ctx, t, e.wl, onRoot.lc, "hello", "green")
		if fault.hits.Load() == 0 {
			t.Fatal("no request met the fault: the test did not exercise an unready virtual workspace")
		}
		t.Logf("MEASURE %d discovery requests answered 404 before the fault ended", fault.hits.Load())
	})

	t.Run("once it serves the export, its tenant is served", func(t *testing.T) {
		healed := time.Now()
		fault.on.Store(false)
		waitReady(ctx, t, onShard.c, main)
		t.Logf("MEASURE the shard's tenant Ready %s after its virtual workspace answered", time.Since(healed).Round(10*time.Millisecond))
		wantConfigMap(ctx, t, e.wl, onShard.lc, "hello", "blue")
		waitKCPMode(ctx, t, e.pf, e.name, metav1.ConditionTrue, v1alpha1.ReasonKCPActive)
		wantVirtualWorkspaces(ctx, t, e, 2, 2)
		wantProbeStatus(ctx, t, probes, http.StatusOK)
	})
}

// vwNotServing answers discovery through the virtual workspaces of one kcp shard
// (host) with 404, as a virtual workspace answers before it serves an export, while
// on is set.
type vwNotServing struct {
	on   atomic.Bool
	host atomic.Value // string
	hits atomic.Int32
}

func (f *vwNotServing) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		host, _ := f.host.Load().(string)
		p := req.URL.Path
		discovery := strings.HasSuffix(p, "/clusters/*/api") || strings.HasSuffix(p, "/clusters/*/apis")
		if f.on.Load() && req.URL.Host == host && strings.HasPrefix(p, "/services/apiexport/") && discovery {
			f.hits.Add(1)
			body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`
			return &http.Response{
				StatusCode: http.StatusNotFound, Status: "404 Not Found", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)),
				ContentLength: int64(len(body)), Request: req,
			}, nil
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// wantVirtualWorkspaces waits for the gauges of e's runtime of published and watched
// virtual workspaces.
func wantVirtualWorkspaces(ctx context.Context, t testing.TB, e *kcpEnv, published, watched float64) {
	t.Helper()
	harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("%v virtual workspaces published, %v watched", published, watched), func(context.Context) error {
		p := testutil.ToFloat64(metrics.KCPVirtualWorkspacesGauge.WithLabelValues(e.name, "published"))
		w := testutil.ToFloat64(metrics.KCPVirtualWorkspacesGauge.WithLabelValues(e.name, "watched"))
		if p != published || w != watched {
			return fmt.Errorf("published %v, watched %v", p, w)
		}
		return nil
	})
}

// wantProbeStatus waits until the runtime's /readyz at addr answers code, and
// returns its verbose body.
func wantProbeStatus(ctx context.Context, t testing.TB, addr string, code int) string {
	t.Helper()
	var body string
	harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("/readyz answering %d", code), func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz?verbose", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		body = string(b)
		if resp.StatusCode != code {
			return fmt.Errorf("%d: %s", resp.StatusCode, body)
		}
		return nil
	})
	return body
}

// bindOnShard creates the workspace name on the kcp shard shard, binds the export there
// accepting the runtime's claims, and creates the blue widget object there.
func bindOnShard(ctx context.Context, t *testing.T, e *kcpEnv, name, shard, object string) tenant {
	t.Helper()
	tn := e.newTenantOn(ctx, t, name, shard)
	newWidget(ctx, t, tn.c, object, "blue")
	return tn
}
