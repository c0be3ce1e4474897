package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
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
	secret     client.ObjectKey // the kubeconfig Secret and its key, for messages
	key        string
	kubeconfig []byte
	digest     string
}

// kcpSupervisor follows the ProviderConfig's `spec.kcp` and runs kcp mode while it is
// set: started when it appears, replaced when it (or the kubeconfig Secret) changes,
// stopped when it is removed. It never restarts the process.
//
// A new configuration replaces the running one only once it works: its run is built
// (provider workspace reached, credentials accepted, APIExport provisioned) while the
// old run keeps serving, and the old run stops just before the new one starts. A new
// configuration that fails is retried with a backoff, and the ProviderConfig's KCPMode
// condition and events say why (kcpstatus.go).
type kcpSupervisor[T provider.Object] struct {
	r        *Runtime[T]
	opts     Options
	platform client.Client // uncached: reads one ProviderConfig and one Secret
	// platformCfg is the tuned platform config the supervisor's own caches use.
	platformCfg *rest.Config
	// events records kcp mode's transitions on the ProviderConfig.
	events events.EventRecorder

	mu      sync.Mutex
	current *kcpRun
	// lastErr is why the current spec.kcp does not run (nil when it runs or is not
	// set), for the readiness check.
	lastErr error
	// wanted says whether the last readable ProviderConfig had spec.kcp.
	wanted bool
	// passSince is when the pass in progress started; zero between passes. A pass
	// that never ends (a wedged start or stop) fails the liveness check.
	passSince time.Time

	// Only the run loop touches these.
	failing kcpFailing
	secret  secretWatch
	// reported is the last KCPMode condition reported, for ProviderConfig types
	// without a status to compare with.
	reported *metav1.Condition
}

// kcpFailing is the configuration that last failed, and when to try it again.
type kcpFailing struct {
	key      string // its digest, or the error when it could not even be read
	attempts int
	retryAt  time.Time
}

type kcpRun struct {
	workspace string
	digest    string
	cancel    context.CancelFunc
	done      chan struct{}
	mgr       mcmanager.Manager
	// vw tells whether the virtual workspace answers (builder/ops.go).
	vw *vwProbe
	// start runs the manager until the run is cancelled, then closes done.
	start func()
}

// Retry timing of the supervisor. A configuration's failure is often fixed outside the
// ProviderConfig (a workspace created, a permission granted in kcp), so a failing one
// is retried on its own: after kcpRetryMin, doubling up to kcpRetryMax. Changes of the
// ProviderConfig and its Secret arrive through watches; kcpResync is the safety net.
const (
	kcpRetryMin = time.Second
	kcpRetryMax = 10 * time.Second
	kcpResync   = 30 * time.Second
)

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
	// Watch only our ProviderConfig, and (secretWatch) only the Secret it names.
	pc := s.r.decl.newProviderConfig()
	c, err := cache.New(s.platformCfg, cache.Options{Scheme: s.r.decl.scheme, ByObject: map[client.Object]cache.ByObject{
		pc: {Field: fields.OneTermEqualSelector("metadata.name", s.r.decl.name)},
	}})
	if err != nil {
		return fmt.Errorf("kcp supervisor cache: %w", err)
	}
	if err := onChange(ctx, c, pc, poke); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	stopEvents := s.startEvents(ctx)
	defer stopEvents()
	defer s.secret.stop()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.stop(logger)
			return nil
		case <-trigger:
		case <-timer.C:
		}
		s.setPass(time.Now())
		next := s.sync(ctx, logger, poke)
		s.setPass(time.Time{})
		timer.Stop()
		select { // drain a tick that fired during the pass
		case <-timer.C:
		default:
		}
		timer.Reset(next)
	}
}

// onChange calls poke on every event of obj's informer in c.
func onChange(ctx context.Context, c cache.Cache, obj client.Object, poke func()) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("kcp supervisor informer: %w", err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	return err
}

// sync compares the desired kcp settings with the running ones, acts, reports, and
// returns when to look again.
func (s *kcpSupervisor[T]) sync(ctx context.Context, logger logr.Logger, poke func()) time.Duration {
	pc, want, err := s.desired(ctx)
	if pc == nil && err != nil {
		// The platform cluster did not answer: keep what runs (a transient read error
		// must not look like "kcp removed").
		logger.Error(err, "reading the ProviderConfig; keeping the current state")
		return kcpResync
	}
	s.secret.follow(ctx, s.platformCfg, secretOf(pc), poke)
	s.mu.Lock()
	running := s.current
	s.wanted = pc != nil && kcpOf(pc) != nil
	s.mu.Unlock()
	switch {
	case err != nil:
		// spec.kcp is set but its Secret or kubeconfig is unusable.
		return s.failed(ctx, logger, pc, running, err.Error(), err)
	case want == nil:
		s.failing = kcpFailing{}
		s.setErr(nil)
		if running != nil {
			s.stop(logger)
			logger.Info("spec.kcp removed: kcp mode stopped")
		}
		if pc != nil {
			s.report(ctx, pc, metav1.ConditionFalse, v1alpha1.ReasonKCPNotConfigured, "spec.kcp is not set: kcp mode is off")
		}
		return kcpResync
	case running != nil && running.digest == want.digest:
		s.failing = kcpFailing{}
		s.setErr(nil)
		s.reportActive(ctx, pc, running)
		return kcpResync
	}
	if s.failing.key == want.digest && time.Now().Before(s.failing.retryAt) {
		return time.Until(s.failing.retryAt)
	}
	// Build the new run while the old one keeps serving.
	run, err := s.newRun(ctx, *want)
	if err != nil {
		return s.failed(ctx, logger, pc, running, want.digest, classify(err, *want))
	}
	s.stop(logger)
	s.mu.Lock()
	s.current = run
	s.mu.Unlock()
	go run.start()
	s.failing = kcpFailing{}
	s.setErr(nil)
	logger.Info("kcp mode running", "providerWorkspace", want.workspace)
	s.reportActive(ctx, pc, run)
	return kcpResync
}

// failed records that the current spec.kcp does not work: what runs keeps running,
// the ProviderConfig says why, and the configuration is tried again after a backoff.
func (s *kcpSupervisor[T]) failed(ctx context.Context, logger logr.Logger, pc provider.ProviderConfig, running *kcpRun, key string, err error) time.Duration {
	if s.failing.key != key {
		s.failing = kcpFailing{key: key}
	}
	s.failing.attempts++
	wait := min(kcpRetryMin<<min(s.failing.attempts-1, 10), kcpRetryMax)
	s.failing.retryAt = time.Now().Add(wait)
	s.setErr(err)
	reason, msg := reasonOf(err), err.Error()
	if running != nil {
		logger.Error(err, "the new kcp configuration fails; serving with the one that last worked", "providerWorkspace", running.workspace, "reason", reason, "retryIn", wait)
		s.report(ctx, pc, metav1.ConditionTrue, reason, fmt.Sprintf("serving with the configuration that last worked (workspace %s); the current spec.kcp fails: %s", running.workspace, msg))
	} else {
		logger.Error(err, "starting kcp mode", "reason", reason, "retryIn", wait)
		s.report(ctx, pc, metav1.ConditionFalse, reason, "kcp mode is not running: "+msg)
	}
	return wait
}

func (s *kcpSupervisor[T]) reportActive(ctx context.Context, pc provider.ProviderConfig, run *kcpRun) {
	s.report(ctx, pc, metav1.ConditionTrue, v1alpha1.ReasonKCPActive, "kcp mode serves the APIExport of workspace "+run.workspace)
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

func kcpOf(pc provider.ProviderConfig) *v1alpha1.KCP {
	if kc, ok := pc.(provider.KCPConfigurer); ok {
		return kc.KCPConfig()
	}
	return nil
}

// secretOf is the kubeconfig Secret pc's spec.kcp names, if any.
func secretOf(pc provider.ProviderConfig) *client.ObjectKey {
	k := kcpOf(pc)
	if k == nil || k.KubeconfigSecret.Name == "" || k.KubeconfigSecret.Namespace == "" {
		return nil
	}
	return &client.ObjectKey{Namespace: k.KubeconfigSecret.Namespace, Name: k.KubeconfigSecret.Name}
}

// desired reads the ProviderConfig (nil when it does not exist), and the kcp settings
// of its spec.kcp (nil when kcp is off). An error with a nil ProviderConfig is a failed
// read; with a ProviderConfig, a spec.kcp that cannot be used.
func (s *kcpSupervisor[T]) desired(ctx context.Context) (provider.ProviderConfig, *kcpSettings, error) {
	pc := s.r.decl.newProviderConfig()
	if err := s.platform.Get(ctx, client.ObjectKey{Name: s.r.decl.name}, pc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	k := kcpOf(pc)
	if k == nil {
		return pc, nil, nil
	}
	// The CRD schema holds the same rules; a ProviderConfig stored under an older or
	// hand-made CRD may not have met them.
	if err := k.Validate(); err != nil {
		return pc, nil, &kcpError{reason: v1alpha1.ReasonProviderConfigInvalid, err: err}
	}
	ref := k.KubeconfigSecret
	invalid := func(format string, args ...any) error {
		return &kcpError{reason: v1alpha1.ReasonKCPKubeconfigInvalid, err: fmt.Errorf(format, args...)}
	}
	secret := &corev1.Secret{}
	if err := s.platform.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return pc, nil, invalid("kubeconfig Secret %s/%s does not exist: create it with the kubeconfig of the runtime's kcp identity under key %q", ref.Namespace, ref.Name, ref.KubeconfigKey())
		}
		return pc, nil, invalid("reading kubeconfig Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	raw := secret.Data[ref.KubeconfigKey()]
	if len(raw) == 0 {
		return pc, nil, invalid("kubeconfig Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.KubeconfigKey())
	}
	sum := sha256.Sum256(append([]byte(k.ProviderWorkspace+"\x00"), raw...))
	return pc, &kcpSettings{
		workspace: k.ProviderWorkspace, secret: client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, key: ref.KubeconfigKey(),
		kubeconfig: raw, digest: hex.EncodeToString(sum[:]),
	}, nil
}

// newRun checks want against kcp and builds its kcp-mode manager without starting it:
// it asks the provider workspace who the credentials are, provisions the APIExport and
// mints the runtime's direct-call token. Its errors are what classify reads.
func (s *kcpSupervisor[T]) newRun(ctx context.Context, want kcpSettings) (_ *kcpRun, err error) {
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
		// The parser's message may quote the kubeconfig: leave it out.
		return nil, &kcpError{reason: v1alpha1.ReasonKCPKubeconfigInvalid, err: fmt.Errorf(
			"the data under key %q of Secret %s is not a kubeconfig: put the kubeconfig of the runtime's kcp identity there", want.key, want.secret)}
	}
	opts.tune(base)
	base.Host = kcpBaseURL(base.Host)
	providerCfg := clusterConfig(base, want.workspace)
	// The first request: its answer tells the causes of a broken spec.kcp apart.
	if err := probeWorkspace(ctx, providerCfg, want); err != nil {
		return nil, err
	}

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
	// workspace calls (docs/design/tenant-credentials.md, "token-cache bug").
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
	run := &kcpRun{workspace: want.workspace, digest: want.digest, cancel: cancel, done: make(chan struct{}), mgr: mgr, vw: vw}
	run.start = func() {
		defer close(run.done)
		if err := mgr.Start(runCtx); err != nil {
			log.FromContext(ctx).Error(err, "kcp mode manager stopped")
			s.setErr(err)
		}
	}
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
