package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ProbeTimeout bounds one readiness check: a probe that hangs is worse than one that
// fails.
const ProbeTimeout = 5 * time.Second

// Enabled says whether a bind address turns its endpoint on: "" and "0" turn it off.
func Enabled(addr string) bool { return addr != "" && addr != "0" }

// CacheSynced is a readiness check passing once c has synced.
func CacheSynced(name string, c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), ProbeTimeout)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("%s cache not synced", name)
		}
		return nil
	}
}

// Elected says whether a manager's Elected channel is closed: the manager leads its
// mode (or runs without leader election).
func Elected(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// MetricsServing says how the metrics endpoint is served.
type MetricsServing struct {
	// Secure serves HTTPS, and only to a client whose bearer token the platform
	// cluster authenticates (TokenReview) and authorizes for get on the non-resource
	// URL /metrics (SubjectAccessReview): 401 without a valid token, 403 without the
	// right. The runtime's ServiceAccount needs create on both reviews.
	Secure bool
	// CertDir holds tls.crt and tls.key for Secure (default: controller-runtime's,
	// under the temporary directory); without them the server makes a self-signed
	// certificate at start.
	CertDir string
}

// ServerOptions are controller-runtime's metrics server options for addr served so.
func (m MetricsServing) ServerOptions(addr string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if m.Secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = m.CertDir
	}
	return o
}

// Options say what Serve serves.
type Options struct {
	// MetricsBindAddress serves controller-runtime's metrics registry; "0" turns it off.
	MetricsBindAddress string
	// Metrics says how: plain HTTP, or HTTPS with authentication and authorization.
	Metrics MetricsServing
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" turns them off.
	HealthProbeBindAddress string
	// Config is the platform cluster's config, which the metrics server is built with.
	Config *rest.Config
	// Healthz and Readyz are the checks behind /healthz and /readyz, by name (each is
	// also served at /healthz/<name>). /healthz always has "ping".
	Healthz, Readyz map[string]healthz.Checker
}

// Serve serves metrics and probes until ctx ends. It returns the first server's error,
// after every server stopped.
func Serve(ctx context.Context, opts Options) error {
	errc := make(chan error, 2)
	servers := 0
	var hc *http.Client
	if opts.Metrics.Secure && Enabled(opts.MetricsBindAddress) {
		// The secure endpoint's filter asks the platform cluster about each scrape.
		var err error
		if hc, err = rest.HTTPClientFor(opts.Config); err != nil {
			return fmt.Errorf("metrics server's client of the platform cluster: %w", err)
		}
	}
	srv, err := metricsserver.NewServer(opts.Metrics.ServerOptions(opts.MetricsBindAddress), opts.Config, hc)
	if err != nil {
		return fmt.Errorf("metrics server: %w", err)
	}
	if srv != nil {
		servers++
		go func() { errc <- srv.Start(ctx) }()
	}
	if Enabled(opts.HealthProbeBindAddress) {
		live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
		ready := &healthz.Handler{Checks: map[string]healthz.Checker{}}
		for name, c := range opts.Healthz {
			live.Checks[name] = c
		}
		for name, c := range opts.Readyz {
			ready.Checks[name] = c
		}
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
