package kcpmode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	mcprovider "github.com/kcp-dev/multicluster-provider/pkg/provider"
	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/ops"
)

// This file holds kcp mode's liveness and readiness checks, which whoever serves the
// process's probes (package ops) adds under the names "kcp-supervisor" and "kcp".

// wedgedPass is how long one pass of the supervisor (stopping and starting kcp mode)
// may take before the liveness check fails: starting includes provisioning and a token
// propagation wait of ten seconds, so minutes mean it is stuck.
const wedgedPass = 5 * time.Minute

// Healthz fails only when the supervisor is stuck in a pass: a kcp server that is down
// or a broken spec.kcp are readiness matters, and restarting the process would not fix
// them.
func (s *Supervisor) Healthz(*http.Request) error {
	s.mu.Lock()
	since := s.passSince
	s.mu.Unlock()
	if !since.IsZero() && time.Since(since) > wedgedPass {
		return fmt.Errorf("kcp supervisor has been starting or stopping kcp mode for %s", time.Since(since).Round(time.Second))
	}
	return nil
}

// Readyz passes when kcp mode is off, or runs and, if this process leads it, watches
// every virtual workspace the endpoint slice lists, and each answers. A standby
// replica (not leading kcp mode) is ready once
// kcp mode started: it cannot reach the virtual workspace before it leads (the
// provider runs only under the lease), and holding standbys unready would stall
// rolling updates.
func (s *Supervisor) Readyz(req *http.Request) error {
	s.mu.Lock()
	started, read, run, lastErr, wanted := s.started, s.read, s.current, s.lastErr, s.wanted
	s.mu.Unlock()
	switch {
	case !started:
		return errors.New("kcp supervisor not started")
	case run == nil && lastErr != nil:
		return fmt.Errorf("kcp mode not running: %w", lastErr)
	case !read:
		// Until the ProviderConfig is read, whether kcp mode is wanted is unknown: a
		// replica ready before that would let a rollout take the serving one away.
		return errors.New("kcp supervisor has not read the ProviderConfig yet")
	case run == nil && wanted:
		return errors.New("kcp mode starting")
	case run == nil:
		return nil // spec.kcp is not set: nothing to be ready for
	}
	if !ops.Elected(run.mgr.Elected()) {
		return nil
	}
	if err := run.notWatched(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(req.Context(), ops.ProbeTimeout)
	defer cancel()
	if run.synced != nil && !run.synced(ctx) {
		return errors.New("the caches of the virtual workspaces (the Service informers among them) have not synced yet")
	}
	return run.vw.check(ctx)
}

func (s *Supervisor) setPass(t time.Time) {
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
