package kcpmode

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/internal/storageversion"
)

// newRun checks want against kcp and builds its kcp-mode manager without starting it:
// it asks the provider workspace who the credentials are, provisions the APIExport and
// mints the runtime's direct-call token. Its errors are what classify reads.
func (s *Supervisor) newRun(ctx context.Context, want kcpSettings) (_ *kcpRun, err error) {
	opts := s.opts
	// Everything started for this run (the manager, the runtime's own token renewer)
	// ends with it.
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	base, err := clientcmd.RESTConfigFromKubeConfig(want.kubeconfig)
	if err != nil {
		// The parser's message may quote the kubeconfig: leave it out.
		return nil, &kcpError{reason: v1alpha1.ReasonKCPKubeconfigInvalid, err: fmt.Errorf(
			"the data under key %q of Secret %s is not a kubeconfig: put the kubeconfig of the runtime's kcp identity there", want.key, want.secret)}
	}
	opts.Tune(base)
	base.Host = kcpBaseURL(base.Host)
	providerCfg := clusterConfig(base, want.workspace)
	// The first request: its answer tells the causes of a broken spec.kcp apart.
	if err := probeWorkspace(ctx, providerCfg, want); err != nil {
		return nil, err
	}

	surface, err := opts.Surface.APISurface()
	if err != nil {
		return nil, fmt.Errorf("provider's kcp API surface: %w", err)
	}
	provClient, err := client.New(providerCfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, fmt.Errorf("provider workspace client: %w", err)
	}
	provision := func(ctx context.Context) (*apiexport.Provisioned, error) {
		return apiexport.Provision(ctx, provClient, surface, apiexport.Options{AllowDowngrade: opts.AllowAPIDowngrade})
	}
	provisioned, err := provision(ctx)
	metrics.APIExportProvisioned(opts.Name, err)
	if err != nil {
		return nil, fmt.Errorf("provisioning APIExport %q in %s: %w", surface.ExportName, want.workspace, err)
	}

	// Direct calls (TokenRequests) use a separate credential from the virtual
	// workspace calls (docs/design/tenant-credentials.md, "token-cache bug").
	vwCfg, directCfg, identity, err := splitCredentials(runCtx, base, want.workspace, opts.Name)
	if err != nil {
		return nil, fmt.Errorf("kcp credentials: %w", err)
	}
	if identity.IsServiceAccount {
		// The direct-call config is an anonymous copy (it carries its own bearer
		// token), which dropped the transport wrapper Tune added to base.
		opts.Tune(directCfg)
	}

	mgr, err := opts.NewManager(runCtx, Connection{
		Workspace:        want.workspace,
		VirtualWorkspace: clusterConfig(vwCfg, want.workspace),
		Direct:           clusterConfig(directCfg, want.workspace),
		Identity:         identity,
		EndpointSlice:    provisioned.EndpointSliceName,
	})
	if err != nil {
		return nil, err
	}

	vw, err := newVWProbe(provClient, provisioned.EndpointSliceName, vwCfg)
	if err != nil {
		return nil, fmt.Errorf("virtual workspace probe: %w", err)
	}
	run := &kcpRun{workspace: want.workspace, digest: want.digest, cancel: cancel, done: make(chan struct{}), mgr: mgr, vw: vw,
		provision: provision, held: provisioned.Held}
	if run.held != "" {
		log.FromContext(ctx).Info("the APIExport is left at a newer API release", "why", run.held)
	}
	run.migrateStorage = func() {
		if !run.migrating.CompareAndSwap(false, true) {
			return // one migration at a time
		}
		go func() {
			defer run.migrating.Store(false)
			logger := log.FromContext(ctx)
			results, err := storageversion.MigrateExport(runCtx, provClient, vwCfg, surface.ExportName, storageversion.Options{})
			for _, r := range results {
				logger.Info("stored objects moved to the storage version in every workspace", "export", surface.ExportName, "to", r.To, "objects", r.Listed, "rewritten", r.Rewritten)
			}
			if err != nil && runCtx.Err() == nil {
				logger.Error(err, "moving stored objects to the storage version; tried again at the next pass", "export", surface.ExportName)
			}
		}()
	}
	run.start = func() {
		defer close(run.done)
		run.migrateStorage()
		if err := mgr.Start(runCtx); err != nil {
			log.FromContext(ctx).Error(err, "kcp mode manager stopped")
			s.setErr(err)
		}
	}
	return run, nil
}

// kcpBaseURL strips a /clusters/<path> suffix: the runtime addresses workspaces itself.
func kcpBaseURL(host string) string {
	u, err := url.Parse(host)
	if err != nil {
		return host
	}
	if i := strings.Index(u.Path, "/clusters/"); i >= 0 {
		u.Path = u.Path[:i]
	}
	return strings.TrimSuffix(u.String(), "/")
}

// clusterConfig points cfg at one workspace.
func clusterConfig(cfg *rest.Config, path string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = kcpBaseURL(cfg.Host) + "/clusters/" + path
	return c
}
