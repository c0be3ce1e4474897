// One file, one idea: Options and how Start mounts each mode's manager. Each mode's own
// assembly lives in kcp.go, platform.go and the mode packages.

package builder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	apisv1alpha1 "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kcpmode"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/internal/ops"
	"github.com/openmcp-project/kcp-serviceprovider/internal/providerconfig"
	"github.com/openmcp-project/kcp-serviceprovider/internal/restmapping"
	"github.com/openmcp-project/kcp-serviceprovider/migration"
	"github.com/openmcp-project/kcp-serviceprovider/onboarding"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

// Options are the deployment-time settings of a Runtime: where the clusters are and how
// the process runs. None of them is provider code.
type Options struct {
	// Platform is the platform cluster (in-cluster config in production): the
	// ProviderConfig, ClusterRequests and AccessRequests live there.
	Platform *rest.Config
	// Onboarding is the onboarding cluster; nil turns standard mode off.
	Onboarding *rest.Config
	// Namespace is the provider's own namespace on the platform cluster (POD_NAMESPACE):
	// what cluster.ProviderNamespaceFromCtx returns, and where the leases live unless
	// LeaseNamespace says otherwise.
	Namespace string
	// AllowAPIDowngrade lets kcp mode move the APIExport back to this binary's
	// schemas when the export carries a newer API release (a deliberate rollback of
	// the API); without it an older binary serves through the newer schemas.
	AllowAPIDowngrade bool
	// LeaseNamespace holds the leases of several replicas (standard mode's leader
	// lease, kcp mode's membership Leases). Empty: Namespace, which is where the
	// openmcp-operator grants the runtime the right to write them.
	LeaseNamespace string
	// LeaderElection says that several replicas run. Standard mode elects a leader
	// (lease `<name>-standard`). kcp mode shares the bound workspaces among the
	// replicas instead, each served by exactly one of them (internal/sharding,
	// docs/design/replicas.md).
	LeaderElection bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; zero keeps
	// controller-runtime's defaults (15s, 10s, 2s). A standby takes over at most about
	// LeaseDuration + RetryPeriod after the leader died. In kcp mode LeaseDuration is
	// instead how long the others wait before they take a silent replica's workspaces
	// (default 8s), RenewDeadline how long after its last renewal a replica stops
	// serving (shorter than LeaseDuration; 5/8 of it when not), and RetryPeriod how
	// often a replica lists the others and re-decides which workspaces it serves.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Replica is this process's identity among the replicas: on the Leases it holds,
	// on the events it records and in the user agent of its requests (hence the field
	// manager of its writes). Default: the host name (the pod's name) and the process
	// ID, which tells apart two processes on one machine.
	Replica string
	// MetricsBindAddress serves Prometheus metrics (docs/metrics.md); "0" turns it
	// off.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS, only to a bearer token the platform
	// cluster authenticates and allows get on the non-resource URL /metrics (401
	// without a valid token, 403 without the right); false serves plain HTTP.
	// MetricsCertDir holds its tls.crt and tls.key; without them the server makes a
	// self-signed certificate.
	MetricsSecure  bool
	MetricsCertDir string
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" turns it off.
	// Readiness covers every mode of the process: the onboarding cache in standard
	// mode, and in kcp mode a running kcp manager that, if it leads, reaches the
	// virtual workspace (see internal/ops and internal/kcpmode).
	HealthProbeBindAddress string

	// RetryInterval is how soon a pending access request is looked at again the first
	// time; the wait then doubles up to a minute (grants also arrive through watches).
	// Default 10s.
	RetryInterval time.Duration
	// GrantTimeout is how long a ClusterRequest or AccessRequest may stay pending
	// before the tenant's object says it is not granted (WorkloadClusterNotGranted,
	// AccessNotGranted) and the platform is asked again. Default 15 minutes.
	GrantTimeout time.Duration
	// MaxConcurrentReconciles per mode. Default 8.
	MaxConcurrentReconciles int
	// ClientQPS and ClientBurst of every client the runtime creates. Defaults 50/100:
	// controller-runtime's 5/10 throttle a runtime serving many tenants.
	ClientQPS   float32
	ClientBurst int
	// PlatformService runs the provider as a platform service instead of the other
	// modes: Service objects on the platform cluster, which is also the end-user and
	// workload cluster (see package platformservice). Set it
	// from the deployment (ParseDeploymentMode), never from provider code.
	PlatformService bool
	// WrapTransport, when set, wraps the transport of every client the runtime
	// builds (platform, onboarding, kcp, virtual workspace, direct calls, workload
	// and end-user clusters). It exists for measurement, e.g. the benchmark in
	// test/bench counts requests by verb with it; production leaves it nil.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// SweepInterval is how often each mode looks for platform-side requests whose
	// tenant object is gone and removes them (internal/sweep). Default 5 minutes;
	// negative turns the sweep off.
	SweepInterval time.Duration
	// SweepAbsences is how many consecutive sweeps must find a tenant gone before its
	// requests are removed. Default 3.
	SweepAbsences int
	// Migration, when set, is what the provider's previous binary on
	// opencontrolplane-runtime named: standard mode keeps those names, adopts its
	// requests and waits for its pods to be gone (package migration). It is the
	// provider's declaration (command.Provider.Migration), passed through here.
	Migration *migration.FromOCR
	// Conversion, when set, serves the Service API's conversion webhook for as long as
	// the runtime runs, in every mode, and makes the kcp schema convert through it; the
	// runtime stops when the webhook does. The run command sets it from
	// command.Provider.Conversion and its --conversion-webhook flags.
	Conversion *ConversionWebhook
}

func (o *Options) metricsServing() ops.MetricsServing {
	return ops.MetricsServing{Secure: o.MetricsSecure, CertDir: o.MetricsCertDir}
}

func (o *Options) defaults() {
	if o.RetryInterval == 0 {
		o.RetryInterval = 10 * time.Second
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = o.Namespace
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 8
	}
	if o.ClientQPS == 0 {
		o.ClientQPS = 50
	}
	if o.ClientBurst == 0 {
		o.ClientBurst = 100
	}
	if o.MetricsBindAddress == "" {
		o.MetricsBindAddress = "0"
	}
	if o.Replica == "" {
		host, _ := os.Hostname()
		o.Replica = fmt.Sprintf("%s-%d", cmp.Or(host, "replica"), os.Getpid())
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
}

func (o *Options) tune(cfg *rest.Config) {
	cfg.QPS = o.ClientQPS
	cfg.Burst = o.ClientBurst
	// The API server names the field manager of a write that names none after the
	// user agent's first segment: the replica's writes carry its identity.
	cfg.UserAgent = fieldOwner(o.Replica) + "/" + rest.DefaultKubernetesUserAgent()
	if o.WrapTransport != nil {
		cfg.Wrap(o.WrapTransport)
	}
}

// Runtime runs a provider in every configured mode.
type Runtime[T provider.Object] struct {
	decl declarations[T]

	mu  sync.Mutex
	sup *kcpmode.Supervisor // kcp mode's, when the provider wired its kcp surface
	std mcmanager.Manager   // standard mode's manager, for the leader gauge
}

// KCPActive says whether kcp mode is running: spec.kcp is set, the APIExport is
// provisioned and the kcp manager started.
func (r *Runtime[T]) KCPActive() bool {
	r.mu.Lock()
	sup := r.sup
	r.mu.Unlock()
	return sup != nil && sup.Active()
}

// Name is the provider's name.
func (r *Runtime[T]) Name() string { return r.decl.name }

// NewProviderConfig returns an empty object of the provider's ProviderConfig type and
// the scheme that knows it, for a command that reports on it (init's APIUpgrade
// condition).
func (r *Runtime[T]) NewProviderConfig() (provider.ProviderConfig, *runtime.Scheme) {
	return r.decl.newProviderConfig(), r.decl.scheme
}

// Start runs every configured mode until ctx ends: standard mode when an onboarding
// cluster is given, kcp mode whenever the ProviderConfig has spec.kcp and the provider
// wired its kcp surface.
func (r *Runtime[T]) Start(ctx context.Context, opts Options) error {
	opts.defaults()
	if opts.Platform == nil {
		return errors.New("no platform cluster config")
	}
	if err := opts.Migration.Validate(); err != nil {
		return err
	}
	adds := []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clustersv1alpha1.AddToScheme}
	if r.decl.kcp != nil {
		adds = append(adds, apisv1alpha1.AddToScheme, apisv1alpha2.AddToScheme)
	}
	for _, add := range adds {
		if err := add(r.decl.scheme); err != nil {
			return err
		}
	}
	if !opts.PlatformService && opts.Onboarding == nil && r.decl.kcp == nil {
		return errors.New("nothing to serve: no onboarding cluster and no kcp surface")
	}
	if opts.Conversion == nil {
		return r.start(ctx, opts, r.decl.kcp)
	}
	served, surface, err := r.serveConversion(ctx, opts, r.decl.kcp)
	if err != nil {
		return err
	}
	err = r.start(served, opts, surface)
	if err == nil && ctx.Err() == nil {
		// The modes stopped because the webhook did.
		err = context.Cause(served)
	}
	return err
}

// start runs the modes of Start until ctx ends; surface is the kcp surface they
// provision.
func (r *Runtime[T]) start(ctx context.Context, opts Options, surface apiexport.Provisionable) error {
	if opts.PlatformService {
		return r.startPlatformService(ctx, opts)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer metrics.AddProcess(r.processSource())()
	errc := make(chan error, 3)
	running := 0
	var sup *kcpmode.Supervisor
	if surface != nil {
		var err error
		if sup, err = r.kcpSupervisor(opts, surface); err != nil {
			return err
		}
		r.mu.Lock()
		r.sup = sup
		r.mu.Unlock()
	}
	if opts.Onboarding != nil {
		mgr, err := r.standardManager(opts, sup)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.std = mgr
		r.mu.Unlock()
		running++
		go func() { errc <- mgr.Start(ctx) }()
		log.FromContext(ctx).Info("standard mode started", "provider", r.decl.name)
	}
	if sup != nil {
		running++
		go func() { errc <- sup.Run(ctx) }()
		if opts.Onboarding == nil {
			// No manager lives as long as the process (kcp mode's restarts with
			// spec.kcp): the Runtime serves metrics and probes itself.
			live, ready := kcpChecks(sup)
			running++
			go func() {
				errc <- ops.Serve(ctx, ops.Options{
					MetricsBindAddress: opts.MetricsBindAddress, Metrics: opts.metricsServing(), HealthProbeBindAddress: opts.HealthProbeBindAddress,
					Config: opts.Platform, Healthz: live, Readyz: ready,
				})
			}()
		}
	}
	// The first mode to fail stops the process: a half-running provider is harder to
	// diagnose than a restarting pod.
	var first error
	for i := 0; i < running; i++ {
		err := <-errc
		if first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// references are the declared references, their namespaces filled in.
func (r *Runtime[T]) references(opts Options) []engine.Reference[T] {
	out := slices.Clone(r.decl.references)
	for i := range out {
		if out[i].Namespace == "" {
			out[i].Namespace = opts.Namespace
		}
	}
	return out
}

// platformManagerOptions are the options of a mode's manager, whose local cluster is
// the platform cluster.
func (r *Runtime[T]) platformManagerOptions(opts Options, mode string) manager.Options {
	// A referenced kind is watched in its namespaces only: the cache would otherwise
	// hold every Secret of the platform cluster.
	var byObject map[client.Object]cache.ByObject
	kinds := map[reflect.Type]client.Object{}
	for _, ref := range r.references(opts) {
		if byObject == nil {
			byObject = map[client.Object]cache.ByObject{}
		}
		key, ok := kinds[reflect.TypeOf(ref.Kind)]
		if !ok {
			key = ref.Kind
			kinds[reflect.TypeOf(ref.Kind)] = key
			byObject[key] = cache.ByObject{Namespaces: map[string]cache.Config{}}
		}
		byObject[key].Namespaces[ref.Namespace] = cache.Config{}
	}
	// The kinds that wake the provider are watched cluster-wide (tenant namespaces come
	// and go), holding only what this provider's writer labelled.
	for _, o := range r.decl.platformWakes {
		if byObject == nil {
			byObject = map[client.Object]cache.ByObject{}
		}
		byObject[o] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{openmcpconst.ManagedByLabel: r.decl.name})}
	}
	return manager.Options{
		Scheme:                  r.decl.scheme,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        r.decl.name + "-" + mode,
		LeaderElectionNamespace: opts.LeaseNamespace,
		// kcp mode's manager restarts in-process when spec.kcp changes, and a rolling
		// update stops the old pod: stepping down at once spares the successor a
		// wait for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 durationOrNil(opts.LeaseDuration),
		RenewDeadline:                 durationOrNil(opts.RenewDeadline),
		RetryPeriod:                   durationOrNil(opts.RetryPeriod),
		Metrics:                       opts.metricsServing().ServerOptions(opts.MetricsBindAddress),
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		Client: client.Options{Cache: &client.CacheOptions{
			// Secrets (access kubeconfigs) and namespaces are read directly: caching them
			// would watch every Secret on the platform cluster.
			DisableFor: []client.Object{&corev1.Secret{}, &corev1.Namespace{}},
		}},
		// Nothing the runtime or the clusteraccess library does reads managed fields;
		// dropping them from cached objects saves their memory in every replica.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject},
	}
}

// standardManager builds standard mode's manager; sup is kcp mode's supervisor, if
// any, whose checks this manager serves too.
func (r *Runtime[T]) standardManager(opts Options, sup *kcpmode.Supervisor) (mcmanager.Manager, error) {
	onboardingCfg := rest.CopyConfig(opts.Onboarding)
	opts.tune(onboardingCfg)
	m := opts.Migration
	names := r.requestNames(m)
	mcp := m.MCPRegistration()
	mode, err := onboarding.NewMode[T](onboardingCfg, onboarding.ModeOptions{
		ProviderName: names.controller, Permissions: r.decl.mcpPerms, WorkerPermissions: r.decl.workerPerms, Scheme: r.decl.scheme,
		RetryInterval: opts.RetryInterval, GrantTimeout: opts.GrantTimeout, Tune: opts.tune,
		MCPID: mcp.ID, MCPSuffix: mcp.Suffix, Adopt: names.adopt, Namespaces: names.namespaces,
	})
	if err != nil {
		return nil, err
	}
	platformCfg := rest.CopyConfig(opts.Platform)
	opts.tune(platformCfg)
	mopts := r.platformManagerOptions(opts, "standard")
	if l := opts.Migration.OldLease(); l != nil {
		// Elect on the old binary's lease, so that an old pod that still leads keeps
		// this one from reconciling, and the other way round.
		mopts.LeaderElection, mopts.LeaderElectionID, mopts.LeaderElectionNamespace = true, l.Name, l.Namespace
		if l.Cluster == migration.LeaseOnOnboarding {
			mopts.LeaderElectionConfig = onboardingCfg
		}
	}
	mgr, err := mcmanager.New(platformCfg, mode.Provider, mopts)
	if err != nil {
		return nil, fmt.Errorf("standard mode manager: %w", err)
	}
	if ops.Enabled(opts.HealthProbeBindAddress) {
		_ = mgr.AddHealthzCheck("ping", healthz.Ping)
		_ = mgr.AddReadyzCheck("onboarding-cache", ops.CacheSynced("onboarding", mode.Cluster.GetCache()))
		// The standard manager serves the probes of the whole process, kcp mode's too.
		live, ready := kcpChecks(sup)
		for name, c := range live {
			_ = mgr.AddHealthzCheck(name, c)
		}
		for name, c := range ready {
			_ = mgr.AddReadyzCheck(name, c)
		}
	}
	eopts, err := r.engineOptions(mgr, onboarding.Labels, opts, names)
	if err != nil {
		return nil, err
	}
	if m != nil {
		if err := r.takeOver(mgr, &eopts, opts); err != nil {
			return nil, err
		}
	}
	e, err := mode.Register(mgr, eopts, engine.Setup{
		Name: r.decl.name + "-standard",
		// A process may start a Runtime again after stopping it (the reliability tests
		// simulate a crash and restart that way).
		Restartable:             true,
		NewList:                 r.decl.newList,
		ProviderConfig:          r.decl.newProviderConfig(),
		ManagedBy:               names.controller,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	})
	if err != nil {
		return nil, fmt.Errorf("standard mode controller: %w", err)
	}
	if err := addSweep(mgr, e, names.controller, standardTenantLabels, nil, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// requestNames are what a mode's platform requests are named after: the controller
// name (request prefix and managed-by label) and the workload registration, and
// whether requests of those names that exist are adopted. Only standard mode with a
// migration declaration names them otherwise than the provider does.
type requestNames struct {
	controller string
	workload   migration.Registration
	adopt      bool
	// namespaces is the memory of tenant namespaces the mode's requesters share
	// (access.Namespaces): the requests of one tenant are all in one namespace.
	namespaces *access.Namespaces
}

// requestNames are the names of standard mode's requests under m, or the provider's
// own (m nil, and every other mode).
func (r *Runtime[T]) requestNames(m *migration.FromOCR) requestNames {
	return requestNames{controller: m.RequestController(r.decl.name), workload: m.WorkloadRegistration(), adopt: m != nil,
		namespaces: access.NewNamespaces()}
}

// engineOptions are the engine's options for one mode, but for the tenancy, which the
// mode's Register fills in: everything but the tenancy and the labels that map requests
// back to tenants is the same in every mode.
func (r *Runtime[T]) engineOptions(mgr mcmanager.Manager, labels func(reconcile.Request) map[string]string, opts Options,
	names requestNames) (engine.Options[T], error) {
	platform := mgr.GetLocalManager().GetClient()
	eopts := engine.Options[T]{
		// The provider reads the platform cluster past every cache (it may read any
		// kind, e.g. a pull secret its ProviderConfig names; a cache would watch them
		// all), through the manager's connection: its QPS, its transport, its metrics.
		PlatformReader:    mgr.GetLocalManager().GetAPIReader(),
		ProviderNamespace: opts.Namespace,
		NewObject:         r.decl.newObject,
		Finalizer:         r.decl.finalizer(),
		ProviderConfig: &providerconfig.Loader{
			Reader: platform, Name: opts.Migration.ProviderConfig(r.decl.name), New: r.decl.newProviderConfig,
		},
		Reconciler:  r.decl.reconciler,
		References:  r.references(opts),
		Provider:    r.decl.name,
		EventSource: eventSource(r.decl.name),
		Replica:     opts.Replica,
		FieldOwner:  fieldOwner(opts.Replica),
	}
	if len(r.decl.platformRules) > 0 {
		// The writer's reads bypass the cache (a cache would watch every object of
		// every kind a provider reads on the platform), but for the kinds it watches
		// (WatchesPlatform), whose label-selected cache holds what it wrote.
		// Its REST mappings follow the platform (package restmapping): a provider
		// that installs a CRD there, or removes one, is answered as a fresh client
		// would be.
		local := mgr.GetLocalManager()
		direct, err := restmapping.NewClient(local.GetConfig(), local.GetHTTPClient(), r.decl.scheme, restmapping.Options{})
		if err != nil {
			return eopts, fmt.Errorf("platform writer: %w", err)
		}
		eopts.PlatformWriter = client.WithFieldOwner(direct, fieldOwner(opts.Replica))
		eopts.PlatformWatches = r.decl.platformWakes
		if len(r.decl.platformWakes) > 0 {
			eopts.PlatformCache = local.GetCache()
		}
		if labels != nil {
			eopts.TenantLabels = func(id cluster.Identity) map[string]string {
				return labels(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: id.Namespace, Name: id.Name}})
			}
		}
	}
	order := func(perms cluster.Permissions, extra workload.Options) engine.WorkloadAccess {
		extra.ControllerName, extra.Permissions, extra.Scheme, extra.Adopt = names.controller, perms, r.decl.scheme, names.adopt
		extra.Labels, extra.RetryInterval, extra.GrantTimeout, extra.Tune = labels, opts.RetryInterval, opts.GrantTimeout, opts.tune
		extra.Namespaces = names.namespaces
		return workload.NewOrderer(platform, extra)
	}
	if r.decl.workload {
		eopts.Workload = order(r.decl.workloadPerms, workload.Options{ID: names.workload.ID, Suffix: names.workload.Suffix})
	}
	for _, a := range r.decl.additional {
		if eopts.Additional == nil {
			eopts.Additional = map[string]engine.WorkloadAccess{}
		}
		eopts.Additional[a.id] = order(a.Permissions, workload.Options{Purpose: a.Purpose, Spec: a.specGenerator(), ID: a.id, Suffix: a.id})
	}
	return eopts, nil
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
		out[string(cluster.ModeStandard)] = ops.Elected(std.Elected())
	}
	if sup != nil {
		if elected, running := sup.Elected(); running {
			out[string(cluster.ModeKCP)] = ops.Elected(elected)
		}
	}
	return out
}

// fieldOwner is the field manager of a replica's writes: "serviceprovider.<replica>".
func fieldOwner(replica string) string { return "serviceprovider." + replica }

// eventSource is the reporting controller of the runtime's events: a qualified name
// naming the provider, so tenants see whose runtime speaks.
func eventSource(provider string) string { return "services.open-control-plane.io/" + provider }

func durationOrNil(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}
