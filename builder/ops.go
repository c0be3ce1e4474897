package builder

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	mcprovider "github.com/kcp-dev/multicluster-provider/pkg/provider"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
)

// This file holds what operators run the process by: probes, the process-level
// metrics source and, when no manager outlives the process's modes, the endpoints
// themselves.
//
// Who serves the endpoints: the standard-mode manager when there is one (it lives as
// long as the process); otherwise (kcp mode only) the Runtime itself, because kcp
// mode's manager is replaced whenever spec.kcp changes and its port would flap.

// probeTimeout bounds one readiness check: a probe that hangs is worse than one that
// fails.
const probeTimeout = 5 * time.Second

// wedgedPass is how long one pass of the kcp supervisor (stopping and starting kcp
// mode) may take before the liveness check fails: starting includes provisioning and
// a token propagation wait of ten seconds, so minutes mean it is stuck.
const wedgedPass = 5 * time.Minute

// eventSource is the reporting controller of the runtime's events: a qualified name
// naming the provider, so tenants see whose runtime speaks.
func eventSource(provider string) string { return "services.open-control-plane.io/" + provider }

func durationOrNil(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// cacheSynced is a readiness check passing once c has synced.
func cacheSynced(name string, c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), probeTimeout)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("%s cache not synced", name)
		}
		return nil
	}
}

// addKCPChecks adds kcp mode's checks to whoever serves the probes.
func (r *Runtime[T]) addKCPChecks(addHealthz, addReadyz func(string, healthz.Checker) error) {
	if r.decl.kcp == nil {
		return
	}
	_ = addHealthz("kcp-supervisor", r.kcpHealthz)
	_ = addReadyz("kcp", r.kcpReadyz)
}

func (r *Runtime[T]) supervisor() *kcpSupervisor[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sup
}

// kcpHealthz fails only when the supervisor is stuck in a pass: a kcp server that is
// down or a broken spec.kcp are readiness matters, and restarting the process would
// not fix them.
func (r *Runtime[T]) kcpHealthz(*http.Request) error {
	sup := r.supervisor()
	if sup == nil {
		return nil
	}
	sup.mu.Lock()
	since := sup.passSince
	sup.mu.Unlock()
	if !since.IsZero() && time.Since(since) > wedgedPass {
		return fmt.Errorf("kcp supervisor has been starting or stopping kcp mode for %s", time.Since(since).Round(time.Second))
	}
	return nil
}

// kcpReadyz passes when kcp mode is off, or runs and, if this process leads it, the
// virtual workspace answers. A standby replica (not leading kcp mode) is ready once
// kcp mode started: it cannot reach the virtual workspace before it leads (the
// provider runs only under the lease), and holding standbys unready would stall
// rolling updates.
func (r *Runtime[T]) kcpReadyz(req *http.Request) error {
	sup := r.supervisor()
	if sup == nil {
		return errors.New("kcp supervisor not started")
	}
	sup.mu.Lock()
	run, lastErr, wanted := sup.current, sup.lastErr, sup.wanted
	sup.mu.Unlock()
	switch {
	case run == nil && lastErr != nil:
		return fmt.Errorf("kcp mode not running: %v", lastErr)
	case run == nil && wanted:
		return errors.New("kcp mode starting")
	case run == nil:
		return nil // spec.kcp is not set: nothing to be ready for
	}
	select {
	case <-run.mgr.Elected():
	default:
		return nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), probeTimeout)
	defer cancel()
	return run.vw.check(ctx)
}

// serveOps serves metrics and probes for a process whose only mode is kcp, until ctx
// ends.
func (r *Runtime[T]) serveOps(ctx context.Context, opts Options) error {
	errc := make(chan error, 2)
	servers := 0
	srv, err := metricsserver.NewServer(metricsserver.Options{BindAddress: opts.MetricsBindAddress}, opts.Platform, nil)
	if err != nil {
		return fmt.Errorf("metrics server: %w", err)
	}
	if srv != nil {
		servers++
		go func() { errc <- srv.Start(ctx) }()
	}
	if opts.HealthProbeBindAddress != "" && opts.HealthProbeBindAddress != "0" {
		live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
		ready := &healthz.Handler{Checks: map[string]healthz.Checker{}}
		r.addKCPChecks(addTo(live), addTo(ready))
		mux := http.NewServeMux()
		for path, h := range map[string]*healthz.Handler{"/healthz": live, "/readyz": ready} {
			mux.Handle(path, http.StripPrefix(path, h))
			mux.Handle(path+"/", http.StripPrefix(path, h))
		}
		servers++
		go func() { errc <- serveHTTP(ctx, opts.HealthProbeBindAddress, mux) }()
	}
	log.FromContext(ctx).Info("serving metrics and probes", "metrics", opts.MetricsBindAddress, "probes", opts.HealthProbeBindAddress)
	if servers == 0 {
		<-ctx.Done()
		return nil
	}
	var first error
	for i := 0; i < servers; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func addTo(h *healthz.Handler) func(string, healthz.Checker) error {
	return func(name string, c healthz.Checker) error {
		h.Checks[name] = c
		return nil
	}
}

// serveHTTP serves handler on addr until ctx ends.
func serveHTTP(ctx context.Context, addr string, handler http.Handler) error {
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("probe server on %s: %w", addr, err)
	}
	<-stopped
	return nil
}

// processSource reports the process's leadership and kcp state at every scrape.
func (r *Runtime[T]) processSource() metrics.ProcessSource {
	src := metrics.ProcessSource{Provider: r.decl.name, Leaders: r.leaders}
	if r.decl.kcp != nil {
		src.KCPActive = r.KCPActive
	}
	return src
}

// leaders says, for each mode whose manager runs here, whether it leads.
func (r *Runtime[T]) leaders() map[string]bool {
	out := map[string]bool{}
	r.mu.Lock()
	std, sup := r.std, r.sup
	r.mu.Unlock()
	if std != nil {
		out[string(cluster.ModeStandard)] = closed(std.Elected())
	}
	if sup != nil {
		sup.mu.Lock()
		run := sup.current
		sup.mu.Unlock()
		if run != nil {
			out[string(cluster.ModeKCP)] = closed(run.mgr.Elected())
		}
	}
	return out
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (s *kcpSupervisor[T]) setPass(t time.Time) {
	s.mu.Lock()
	s.passSince = t
	s.mu.Unlock()
}

// vwProbe checks that the APIExport's virtual workspace answers the runtime: every
// endpoint its endpoint slice lists serves a one-item list of APIBindings (the object
// the cluster provider watches there) with the runtime's virtual-workspace
// credential.
type vwProbe struct {
	provider client.Client // the provider workspace
	slice    string
	http     *http.Client
}

func newVWProbe(provider client.Client, slice string, vwCfg *rest.Config) (*vwProbe, error) {
	hc, err := rest.HTTPClientFor(vwCfg)
	if err != nil {
		return nil, err
	}
	return &vwProbe{provider: provider, slice: slice, http: hc}, nil
}

func (p *vwProbe) check(ctx context.Context) error {
	es := &apisv1alpha1.APIExportEndpointSlice{}
	if err := p.provider.Get(ctx, client.ObjectKey{Name: p.slice}, es); err != nil {
		return fmt.Errorf("reading APIExportEndpointSlice %s: %w", p.slice, err)
	}
	urls, err := mcprovider.DefaultExtractURLsFromEndpointSlice(es)
	if err != nil {
		return err
	}
	// kcp lists an endpoint only once a workspace binds the export: with none there
	// is nothing to connect to, and nothing to serve.
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/clusters/*/apis/apis.kcp.io/v1alpha1/apibindings?limit=1", nil)
		if err != nil {
			return err
		}
		resp, err := p.http.Do(req)
		if err != nil {
			return fmt.Errorf("virtual workspace %s: %w", u, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("virtual workspace %s answered %s", u, resp.Status)
		}
	}
	return nil
}
