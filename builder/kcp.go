package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
	"github.com/openmcp-project/kcp-serviceprovider/workspaces"
)

// KCP wires the provider's kcp API surface. Without it kcp mode never starts, whatever
// the ProviderConfig says: kcp support is opt-in per provider.
func (b *Builder[T]) KCP(p apiexport.Provisionable) *Builder[T] {
	b.kcp = p
	return b
}

// kcpSettings are what a kcp run is built from; a change restarts the run.
type kcpSettings struct {
	workspace  string
	kubeconfig []byte
	digest     string
}

// kcpSupervisor follows the ProviderConfig's `spec.kcp` and runs kcp mode while it is
// set: started when it appears, restarted when it (or the kubeconfig Secret) changes,
// stopped when it is removed. It never restarts the process.
type kcpSupervisor[T provider.Object] struct {
	r        *Runtime[T]
	opts     Options
	platform client.Client // uncached: reads one ProviderConfig and one Secret
	// platformCfg is the tuned platform config the supervisor's own cache uses.
	platformCfg *rest.Config

	mu      sync.Mutex
	current *kcpRun
	// lastErr is the last start failure, for the readiness check and logs.
	lastErr error
	// wanted says whether the last readable ProviderConfig had spec.kcp.
	wanted bool
	// passSince is when the pass in progress started; zero between passes. A pass
	// that never ends (a wedged start or stop) fails the liveness check.
	passSince time.Time
}

type kcpRun struct {
	digest string
	cancel context.CancelFunc
	done   chan struct{}
	mgr    mcmanager.Manager
	// vw tells whether the virtual workspace answers (builder/ops.go).
	vw *vwProbe
}

// run blocks until ctx ends, keeping kcp mode in line with the ProviderConfig.
func (s *kcpSupervisor[T]) run(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("kcp-supervisor")
	ctx = log.IntoContext(ctx, logger)

	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	// Watch only our ProviderConfig; the Secret is re-read on every pass and on a
	// ticker, so a rotated kubeconfig is picked up within a minute.
	pc := s.r.decl.newProviderConfig()
	c, err := cache.New(s.platformCfg, cache.Options{Scheme: s.r.decl.scheme, ByObject: map[client.Object]cache.ByObject{
		pc: {Field: fields.OneTermEqualSelector("metadata.name", s.r.decl.name)},
	}})
	if err != nil {
		return fmt.Errorf("kcp supervisor cache: %w", err)
	}
	inf, err := c.GetInformer(ctx, pc)
	if err != nil {
		return fmt.Errorf("kcp supervisor informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()

	ticker := time.NewTicker(30 * time.Second)
	defer ticker.Stop()
	poke()
	for {
		select {
		case <-ctx.Done():
			s.stop(logger)
			return nil
		case <-trigger:
		case <-ticker.C:
		}
		s.setPass(time.Now())
		s.sync(ctx, logger)
		s.setPass(time.Time{})
	}
}

// sync compares the desired kcp settings with the running ones.
func (s *kcpSupervisor[T]) sync(ctx context.Context, logger logr.Logger) {
	want, err := s.desired(ctx)
	s.mu.Lock()
	running := s.current
	if err == nil {
		s.wanted = want != nil
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		// Keep what runs: a transient read error or a broken Secret must not stop
		// serving tenants.
		logger.Error(err, "reading kcp settings; keeping the current state")
		s.setErr(err)
		return
	case want == nil && running == nil:
		return
	case want != nil && running != nil && running.digest == want.digest:
		return
	}
	s.stop(logger)
	if want == nil {
		logger.Info("spec.kcp removed: kcp mode stopped")
		s.setErr(nil)
		return
	}
	run, err := s.start(ctx, *want)
	if err != nil {
		logger.Error(err, "starting kcp mode", "providerWorkspace", want.workspace)
		s.setErr(err)
		return
	}
	s.setErr(nil)
	s.mu.Lock()
	s.current = run
	s.mu.Unlock()
	logger.Info("kcp mode running", "providerWorkspace", want.workspace)
}

func (s *kcpSupervisor[T]) setErr(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

func (s *kcpSupervisor[T]) stop(logger logr.Logger) {
	s.mu.Lock()
	run := s.current
	s.current = nil
	s.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
	logger.Info("kcp mode stopped")
}

// desired reads spec.kcp and the kubeconfig it points at; nil when kcp is off.
func (s *kcpSupervisor[T]) desired(ctx context.Context) (*kcpSettings, error) {
	pc := s.r.decl.newProviderConfig()
	if err := s.platform.Get(ctx, client.ObjectKey{Name: s.r.decl.name}, pc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	kc, ok := pc.(provider.KCPConfigurer)
	if !ok || kc.KCPConfig() == nil {
		return nil, nil
	}
	k := kc.KCPConfig()
	if err := ValidateKCP(k); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := s.platform.Get(ctx, client.ObjectKey{Namespace: k.KubeconfigSecret.Namespace, Name: k.KubeconfigSecret.Name}, secret); err != nil {
		return nil, fmt.Errorf("kcp kubeconfig Secret %s/%s: %w", k.KubeconfigSecret.Namespace, k.KubeconfigSecret.Name, err)
	}
	raw := secret.Data[k.KubeconfigSecret.KubeconfigKey()]
	if len(raw) == 0 {
		return nil, fmt.Errorf("kcp kubeconfig Secret %s/%s has no key %q", secret.Namespace, secret.Name, k.KubeconfigSecret.KubeconfigKey())
	}
	sum := sha256.Sum256(append([]byte(k.ProviderWorkspace+"\x00"), raw...))
	return &kcpSettings{workspace: k.ProviderWorkspace, kubeconfig: raw, digest: hex.EncodeToString(sum[:])}, nil
}

// ValidateKCP checks a spec.kcp section with the rules of its CRD schema (see
// v1alpha1.KCP.Validate), for ProviderConfigs stored under an older or hand-made CRD.
func ValidateKCP(k *v1alpha1.KCP) error { return k.Validate() }

// start provisions the APIExport and starts a kcp-mode manager.
func (s *kcpSupervisor[T]) start(ctx context.Context, want kcpSettings) (_ *kcpRun, err error) {
	r, opts := s.r, s.opts
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
		return nil, errors.New("kcp kubeconfig does not parse")
	}
	opts.tune(base)
	base.Host = kcpBaseURL(base.Host)
	providerCfg := clusterConfig(base, want.workspace)

	surface, err := r.decl.kcp.APISurface()
	if err != nil {
		return nil, fmt.Errorf("provider's kcp API surface: %w", err)
	}
	provClient, err := client.New(providerCfg, client.Options{Scheme: r.decl.scheme})
	if err != nil {
		return nil, fmt.Errorf("provider workspace client: %w", err)
	}
	provisioned, err := apiexport.Provision(ctx, provClient, surface, apiexport.Options{})
	metrics.APIExportProvisioned(r.decl.name, err)
	if err != nil {
		return nil, fmt.Errorf("provisioning APIExport %q in %s: %w", surface.ExportName, want.workspace, err)
	}

	// Direct calls (TokenRequests) use a separate credential from the virtual
	// workspace calls: kcp v0.30 lets a token used on the virtual workspace act with
	// the virtual workspace's warrant on direct calls for a while (see
	// docs/design/tenant-credentials.md).
	vwCfg, directCfg, identity, err := splitCredentials(runCtx, base, want.workspace, r.decl.name)
	if err != nil {
		return nil, fmt.Errorf("kcp credentials: %w", err)
	}
	if identity.IsServiceAccount && opts.WrapTransport != nil {
		// The direct-call config is an anonymous copy (it carries its own bearer
		// token), which dropped the transport wrapper tune added to base.
		directCfg.Wrap(opts.WrapTransport)
	}
	vwProviderCfg := clusterConfig(vwCfg, want.workspace)

	// One watch of the Service type serves every workspace (workspaces.SharedWatch).
	objects := workspaces.NewSharedWatch(r.decl.newObject(), r.decl.newList)
	mcProvider, err := objects.NewProvider(vwProviderCfg, provisioned.EndpointSliceName, r.decl.scheme)
	if err != nil {
		return nil, fmt.Errorf("kcp apiexport provider: %w", err)
	}
	mopts := r.platformManagerOptions(opts, "kcp")
	// The standard-mode manager serves metrics and probes for the process.
	mopts.Metrics.BindAddress = "0"
	mopts.HealthProbeBindAddress = "0"
	platformCfg := rest.CopyConfig(opts.Platform)
	opts.tune(platformCfg)
	mgr, err := mcmanager.New(platformCfg, mcProvider, mopts)
	if err != nil {
		return nil, fmt.Errorf("kcp mode manager: %w", err)
	}
	platform := mgr.GetLocalManager().GetClient()
	if err := mgr.Add(objects); err != nil {
		return nil, err
	}

	minter := tokens.New(tokens.Options{
		Direct:       clusterConfig(directCfg, want.workspace),
		Identity:     identity,
		ProviderName: r.decl.name,
		Rules:        policyRules(r.decl.mcpPerms),
		Labels:       map[string]string{ManagedByLabel: r.decl.name},
		Observe:      metrics.TokenObserver(r.decl.name),
	})
	// Tampering with the worker's access in a workspace is repaired within seconds.
	accessWatch := workspaces.NewAccessWatch(minter, r.decl.scheme, map[string]string{ManagedByLabel: r.decl.name})
	objects.OnVirtualWorkspace(accessWatch.VirtualWorkspace)
	tenancy := workspaces.NewTenancy[T](workspaces.Options{
		Minter: minter, NewList: r.decl.newList, Kind: r.decl.gvk.Kind,
		Scheme: r.decl.scheme, Tune: opts.tune, RetryInterval: opts.RetryInterval,
	})
	e, err := engine.Register(mgr, r.engineOptions(platform, tenancy, workspaces.Labels, opts), engine.Setup{
		Name:                    r.decl.name + "-kcp",
		NewList:                 r.decl.newList,
		ProviderConfig:          r.decl.newProviderConfig(),
		ManagedBy:               r.decl.name,
		Singleton:               true,
		Restartable:             true,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		WrapCluster:             workspaces.NewSharedDiscovery().Wrap,
		SharedWatch:             objects.Source,
		Sources:                 []func(engine.ClusterLister) source.TypedSource[mcreconcile.Request]{accessWatch.Source},
	})
	if err != nil {
		return nil, fmt.Errorf("kcp mode controller: %w", err)
	}
	// A workspace that is briefly not engaged (this manager restarting, the virtual
	// workspace reconnecting) is not swept: the sweep wants SweepAbsences consecutive
	// absences, and it restarts with the manager.
	if err := addSweep(mgr, e, r.decl.name, kcpTenantLabels, opts); err != nil {
		return nil, err
	}

	vw, err := newVWProbe(provClient, provisioned.EndpointSliceName, vwCfg)
	if err != nil {
		return nil, fmt.Errorf("virtual workspace probe: %w", err)
	}
	run := &kcpRun{digest: want.digest, cancel: cancel, done: make(chan struct{}), mgr: mgr, vw: vw}
	go func() {
		defer close(run.done)
		if err := mgr.Start(runCtx); err != nil {
			log.FromContext(ctx).Error(err, "kcp mode manager stopped")
			s.setErr(err)
		}
	}()
	return run, nil
}

// ManagedByLabel marks what the runtime creates in tenant workspaces; tenants can
// narrow the permission claims they accept to objects carrying it.
const ManagedByLabel = "services.open-control-plane.io/managed-by"

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

// policyRules turns the declared end-user permissions into the workspace ClusterRole's
// rules.
func policyRules(p workload.Permissions) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, pr := range p.Rules {
		rules = append(rules, pr.Rules...)
	}
	return rules
}
