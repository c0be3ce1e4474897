package ops

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// TestServe runs the endpoints a process without a long-lived manager serves itself,
// and checks that the probes answer with the checks they were given, as they change.
func TestServe(t *testing.T) {
	var ready, live checkResult
	ready.set(errors.New("kcp mode starting"))
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{
			Config: &rest.Config{Host: "https://127.0.0.1:1"}, MetricsBindAddress: metricsAddr, HealthProbeBindAddress: probeAddr,
			Healthz: map[string]healthz.Checker{"kcp-supervisor": live.check},
			Readyz:  map[string]healthz.Checker{"kcp": ready.check},
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	metrics.APIExportProvisioned("ops-test", nil)
	body := get(t, "http://"+metricsAddr+"/metrics", http.StatusOK)
	if want := `serviceprovider_kcp_apiexport_provisions_total{provider="ops-test",result="success"} 1`; !strings.Contains(body, want) {
		t.Errorf("metrics lack %s", want)
	}
	get(t, "http://"+probeAddr+"/healthz", http.StatusOK)
	get(t, "http://"+probeAddr+"/healthz/ping", http.StatusOK)

	get(t, "http://"+probeAddr+"/readyz", http.StatusInternalServerError)
	get(t, "http://"+probeAddr+"/readyz/kcp", http.StatusInternalServerError)
	if body := get(t, "http://"+probeAddr+"/readyz?verbose", http.StatusInternalServerError); !strings.Contains(body, "kcp failed") {
		t.Errorf("verbose readiness does not name the failing check:\n%s", body)
	}
	ready.set(nil)
	get(t, "http://"+probeAddr+"/readyz", http.StatusOK)

	live.set(errors.New("wedged"))
	get(t, "http://"+probeAddr+"/healthz", http.StatusInternalServerError)
}

// checkResult is a check whose result the test sets.
type checkResult struct {
	mu  sync.Mutex
	err error
}

func (c *checkResult) set(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *checkResult) check(*http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
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
