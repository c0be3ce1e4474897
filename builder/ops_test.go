package builder

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestServeOps runs the endpoints a kcp-only process serves itself and walks kcp
// mode's readiness through its states (the states with a running kcp manager are
// covered by test/e2e-kcp's TestOperations).
func TestServeOps(t *testing.T) {
	r := &Runtime[*widget.Widget]{decl: declarations[*widget.Widget]{name: "ops-test",
		kcp: apiexport.SurfaceFunc(func() (apiexport.Surface, error) { return apiexport.Surface{}, nil })}}
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- r.serveOps(ctx, Options{Platform: &rest.Config{Host: "https://127.0.0.1:1"}, MetricsBindAddress: metricsAddr, HealthProbeBindAddress: probeAddr})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveOps: %v", err)
		}
	}()

	metrics.APIExportProvisioned("ops-test", nil)
	body := get(t, "http://"+metricsAddr+"/metrics", http.StatusOK)
	if want := `serviceprovider_kcp_apiexport_provisions_total{provider="ops-test",result="success"} 1`; !strings.Contains(body, want) {
		t.Errorf("metrics lack %s", want)
	}
	get(t, "http://"+probeAddr+"/healthz", http.StatusOK)

	// Before the supervisor runs, then with spec.kcp unset, set but starting, failed.
	get(t, "http://"+probeAddr+"/readyz", http.StatusInternalServerError)
	sup := &kcpSupervisor[*widget.Widget]{r: r}
	r.mu.Lock()
	r.sup = sup
	r.mu.Unlock()
	get(t, "http://"+probeAddr+"/readyz", http.StatusOK)
	sup.mu.Lock()
	sup.wanted = true
	sup.mu.Unlock()
	if err := r.kcpReadyz(httpRequest(t)); err == nil || !strings.Contains(err.Error(), "starting") {
		t.Errorf("spec.kcp set, not running: %v", err)
	}
	sup.setErr(errors.New(`kcp kubeconfig Secret default/kcp: secrets "kcp" not found`))
	if err := r.kcpReadyz(httpRequest(t)); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("start failed: %v", err)
	}
	get(t, "http://"+probeAddr+"/readyz/kcp", http.StatusInternalServerError)
	get(t, "http://"+probeAddr+"/readyz?verbose", http.StatusInternalServerError)

	// Liveness fails only for a wedged supervisor pass.
	sup.setPass(time.Now().Add(-time.Minute))
	get(t, "http://"+probeAddr+"/healthz", http.StatusOK)
	sup.setPass(time.Now().Add(-2 * wedgedPass))
	get(t, "http://"+probeAddr+"/healthz", http.StatusInternalServerError)
}

func httpRequest(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// get polls url until it answers code (the servers start asynchronously) and returns
// the body.
func get(t *testing.T, url string, code int) string {
	t.Helper()
	var body string
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if resp.StatusCode != code {
			last = errors.New(resp.Status + ": " + body)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("GET %s: want %d: %v", url, code, last)
	}
	return body
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
