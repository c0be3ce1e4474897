// One file, one idea: the supervisor's lifecycle of kcp mode (follow spec.kcp, start,
// stop and retry the manager, report it) is one state machine behind one lock.

package kcpmode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpprovider"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

// Options configure a Supervisor.
type Options struct {
	// Name is the provider's name: the provider label of kcp mode's metrics, and the
	// name of its ProviderConfig unless ProviderConfigName says otherwise.
	Name string
	// ProviderConfigName names the ProviderConfig when it is not Name (a provider
	// that kept its old binary's name for it, see package migration).
	ProviderConfigName string
	// Scheme knows the ProviderConfig type and kcp's APIs.
	Scheme *runtime.Scheme
	// NewProviderConfig returns an empty ProviderConfig of the provider's type.
	NewProviderConfig func() provider.ProviderConfig
	// Surface is the provider's kcp API surface, provisioned as an APIExport in the
	// provider workspace.
	Surface apiexport.Provisionable
	// Platform reads the ProviderConfig and the kubeconfig Secret and writes the
	// ProviderConfig's status. Uncached: it reads one object of each.
	Platform client.Client
	// PlatformConfig is the (tuned) platform cluster config of the supervisor's own
	// watches and events.
	PlatformConfig *rest.Config
	// Tune adjusts every kcp config the supervisor builds (rate limits, the transport
	// wrapper of builder.Options.WrapTransport).
	Tune func(*rest.Config)
	// EventSource is the reporting controller of the events on the ProviderConfig;
	// Replica their reporting instance.
	EventSource, Replica string
	// AllowAPIDowngrade lets provisioning move an export of a newer API release back
	// (apiexport.Options.AllowDowngrade).
	AllowAPIDowngrade bool
	// NewManager builds kcp mode's manager, not started, for a configuration that
	// works. ctx ends when the run ends.
	NewManager func(ctx context.Context, c Connection) (mcmanager.Manager, error)
}

// Connection is a working kcp configuration, as kcp mode's manager is built from it.
type Connection struct {
	// Workspace is the provider workspace's path.
	Workspace string
	// VirtualWorkspace is the runtime's virtual-workspace credential, pointed at the
	// provider workspace (where the APIExportEndpointSlice lives).
	VirtualWorkspace *rest.Config
	// Direct is the runtime's direct-call credential (TokenRequests in tenant
	// workspaces), pointed at the provider workspace; it differs from
	// VirtualWorkspace (credentials.go says why).
	Direct *rest.Config
	// Identity is who the credentials are.
	Identity tokens.Identity
	// EndpointSlice names the APIExportEndpointSlice of the provisioned APIExport.
	EndpointSlice string
}

// kcpSettings are what a kcp run is built from; a change restarts the run.
type kcpSettings struct {
	workspace  string
	secret     client.ObjectKey // the kubeconfig Secret and its key, for messages
	key        string
	kubeconfig []byte
	digest     string
}

// Supervisor follows the ProviderConfig's `spec.kcp` and runs kcp mode while it is
// set: started when it appears, replaced when it (or the kubeconfig Secret) changes,
// stopped when it is removed. It never restarts the process.
//
// A new configuration replaces the running one only once it works: its run is built
// (provider workspace reached, credentials accepted, APIExport provisioned) while the
// old run keeps serving, and the old run stops just before the new one starts. A new
// configuration that fails is retried with a backoff, and the ProviderConfig's KCPMode
// condition and events say why (status.go).
type Supervisor struct {
	opts Options
	// events records kcp mode's transitions on the ProviderConfig.
	events events.EventRecorder

	mu sync.Mutex
	// started says Run began, for the readiness check.
	started bool
	current *kcpRun
	// lastErr is why the current spec.kcp does not run (nil when it runs or is not
	// set), for the readiness check.
	lastErr error
	// wanted says whether the last readable ProviderConfig had spec.kcp; read says
	// one was read (or found missing) at all.
	wanted, read bool
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

// New returns a Supervisor; Run runs it.
func New(opts Options) *Supervisor {
	return &Supervisor{opts: opts}
}

// kcpFailing is the configuration that last failed, and when to try it again.
type kcpFailing struct {
	key      string // its digest, or the error when it could not even be read
	attempts int
	retryAt  time.Time
}

// kcpRun is kcp mode running with one configuration.
type kcpRun struct {
	workspace string
	digest    string
	cancel    context.CancelFunc
	done      chan struct{}
	mgr       mcmanager.Manager
	// vw tells whether the virtual workspace answers (checks.go).
	vw *vwProbe
	// provision provisions the export again (the re-check of each pass, see
	// recheckExport); held is what the last provisioning said of an export of a newer
	// API release, or why the last re-check failed.
	provision func(ctx context.Context) (*apiexport.Provisioned, error)
	held      string
	// migrateStorage starts moving stored objects to the storage version of the
	// export's schemas (package storageversion), unless a migration runs; it returns
	// at once. Each pass calls it, so a failed migration is tried again.
	migrateStorage func()
	migrating      atomic.Bool
	// unwatched, when the manager's provider reports it, lists the virtual
	// workspaces the endpoint slice publishes that kcp mode cannot watch yet.
	unwatched func() []kcpprovider.Unwatched
	// synced, when the manager's provider reports it, waits until the caches of the
	// watched virtual workspaces, the Service informers among them, have synced.
	synced func(ctx context.Context) bool
	// start runs the manager until the run is cancelled, then closes done.
	start func()
}

// Retry timing of the supervisor. A configuration's failure is often fixed outside the
// ProviderConfig (a workspace created, a permission granted in kcp), so a failing one
// is retried on its own: after kcpRetryMin, doubling up to kcpRetryMax. Changes of the
// ProviderConfig and its Secret arrive through watches; kcpResync is the safety net,
// kcpReadRetry the next look after the platform did not answer. Each pass reads both
// objects past the cache, so a short resync costs requests for ever
// (docs/design/measured.md).
const (
	kcpRetryMin  = time.Second
	kcpRetryMax  = 10 * time.Second
	kcpResync    = 5 * time.Minute
	kcpReadRetry = 30 * time.Second
)

// exportRecheckTimeout bounds the re-check of the APIExport in a pass.
const exportRecheckTimeout = 20 * time.Second

// Active says whether kcp mode is running: spec.kcp is set, the APIExport is
// provisioned and the kcp manager started.
func (s *Supervisor) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current != nil
}

// Elected is the Elected channel of the running kcp manager; false when kcp mode does
// not run.
func (s *Supervisor) Elected() (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return nil, false
	}
	return s.current.mgr.Elected(), true
}

// Run blocks until ctx ends, keeping kcp mode in line with the ProviderConfig.
func (s *Supervisor) Run(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("kcp-supervisor")
	ctx = log.IntoContext(ctx, logger)
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()

	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	// Watch only our ProviderConfig, and (secretWatch) only the Secret it names.
	pc := s.opts.NewProviderConfig()
	c, err := cache.New(s.opts.PlatformConfig, cache.Options{Scheme: s.opts.Scheme, ByObject: map[client.Object]cache.ByObject{
		pc: {Field: fields.OneTermEqualSelector("metadata.name", s.providerConfigName())},
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
func (s *Supervisor) sync(ctx context.Context, logger logr.Logger, poke func()) time.Duration {
	pc, want, err := s.desired(ctx)
	if pc == nil && err != nil {
		// The platform cluster did not answer: keep what runs (a transient read error
		// must not look like "kcp removed").
		logger.Error(err, "reading the ProviderConfig; keeping the current state")
		return kcpReadRetry
	}
	// The safety net's pace, unless the Secret's watch is missing and only re-reads
	// see it change.
	resync := kcpResync
	if !s.secret.follow(ctx, s.opts.PlatformConfig, secretOf(pc), poke) {
		resync = kcpReadRetry
	}
	s.mu.Lock()
	running := s.current
	s.wanted, s.read = pc != nil && kcpOf(pc) != nil, true
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
		return resync
	case running != nil && running.digest == want.digest:
		s.failing = kcpFailing{}
		s.setErr(nil)
		running.recheckExport(ctx)
		if running.migrateStorage != nil {
			running.migrateStorage()
		}
		s.reportActive(ctx, pc, running)
		return resync
	}
	if s.failing.key == want.digest && time.Now().Before(s.failing.retryAt) {
		return time.Until(s.failing.retryAt)
	}
	// Build the new run while the old one keeps serving.
	run, err := s.newRun(ctx, *want)
	if err != nil {
		return s.failed(ctx, logger, pc, running, want.digest, classify(err, *want))
	}
	if p, ok := run.mgr.GetProvider().(watchReporter); ok {
		// A virtual workspace that cannot be watched, or is watched again, is
		// reported at once.
		p.Notify(poke)
		run.unwatched = p.Unwatched
	}
	if p, ok := run.mgr.GetProvider().(cacheSyncer); ok {
		run.synced = p.WaitForCacheSync
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
	return resync
}

// failed records that the current spec.kcp does not work: what runs keeps running,
// the ProviderConfig says why, and the configuration is tried again after a backoff.
func (s *Supervisor) failed(ctx context.Context, logger logr.Logger, pc provider.ProviderConfig, running *kcpRun, key string, err error) time.Duration {
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

// watchReporter is what kcp mode's cluster provider (package kcpprovider) tells of
// the virtual workspaces it cannot watch.
type watchReporter interface {
	Notify(func())
	Unwatched() []kcpprovider.Unwatched
}

// cacheSyncer is a multicluster provider whose caches readiness waits for
// (kcpprovider.Provider).
type cacheSyncer interface {
	WaitForCacheSync(ctx context.Context) bool
}

func (s *Supervisor) reportActive(ctx context.Context, pc provider.ProviderConfig, run *kcpRun) {
	if err := run.notWatched(); err != nil {
		s.report(ctx, pc, metav1.ConditionTrue, v1alpha1.ReasonVirtualWorkspaceNotWatched,
			fmt.Sprintf("kcp mode serves the APIExport of workspace %s, but not the tenants on a kcp shard: %v", run.workspace, err))
		return
	}
	if run.held != "" {
		s.report(ctx, pc, metav1.ConditionTrue, v1alpha1.ReasonAPIReleaseHeld,
			fmt.Sprintf("kcp mode serves the APIExport of workspace %s; %s", run.workspace, run.held))
		return
	}
	s.report(ctx, pc, metav1.ConditionTrue, v1alpha1.ReasonKCPActive, "kcp mode serves the APIExport of workspace "+run.workspace)
}

// recheckExport provisions the export again while kcp mode runs, at each pass of the
// supervisor (a change of spec.kcp or its Secret, else every kcpResync): an export
// moved back by a binary without the release guard is moved forward again, and one
// moved forward by a newer replica is left alone and reported (held).
func (r *kcpRun) recheckExport(ctx context.Context) {
	if r.provision == nil {
		return
	}
	// Bounded: a kcp that hangs must not hold the supervisor's pass for the two
	// minutes provisioning may take at start.
	ctx, cancel := context.WithTimeout(ctx, exportRecheckTimeout)
	defer cancel()
	p, err := r.provision(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "re-checking the APIExport; serving on")
		r.held = "re-checking the APIExport failed: " + err.Error()
		return
	}
	r.held = p.Held
}

// notWatched says which virtual workspaces the run cannot watch, and why; nil when
// it watches every one the endpoint slice lists.
func (r *kcpRun) notWatched() error {
	if r.unwatched == nil {
		return nil
	}
	var errs []error
	for _, u := range r.unwatched() {
		errs = append(errs, fmt.Errorf("virtual workspace %s is published in the APIExportEndpointSlice and not watched (retried with backoff): %w", u.URL, u.Err))
	}
	return errors.Join(errs...)
}

func (s *Supervisor) setErr(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

func (s *Supervisor) stop(logger logr.Logger) {
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

func (s *Supervisor) providerConfigName() string {
	if s.opts.ProviderConfigName != "" {
		return s.opts.ProviderConfigName
	}
	return s.opts.Name
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
func (s *Supervisor) desired(ctx context.Context) (provider.ProviderConfig, *kcpSettings, error) {
	pc := s.opts.NewProviderConfig()
	if err := s.opts.Platform.Get(ctx, client.ObjectKey{Name: s.providerConfigName()}, pc); err != nil {
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
	if err := s.opts.Platform.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
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
