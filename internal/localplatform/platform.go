package localplatform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
)

// Defaults for [Options].
const (
	DefaultNamespace               = "openmcp-system"
	DefaultAccessNamespace         = "openmcp-access"
	DefaultProfile                 = "local"
	DefaultProviderName            = "localplatform"
	DefaultTokenTTL                = time.Hour
	DefaultRetryInterval           = 2 * time.Second
	DefaultMaxConcurrentReconciles = 4
)

const (
	prefix = "localplatform.openmcp.cloud/"

	// TargetAnnotation on a ClusterRequest names the target cluster that must serve it
	// (otherwise the first target added with the purpose is used, or, if that one
	// belongs to a pool of several, the pool's least used). With ClusterProviderOnly
	// it picks, among the targets of the pool behind the Cluster's profile, the one
	// backing the Cluster the scheduler created for the request. The platform also
	// sets it on AccessRequests to remember on which target it created their
	// ServiceAccount and RBAC.
	TargetAnnotation = prefix + "target"
	// TargetLabel on a Cluster object names the target cluster backing it; on a
	// ClusterProfile of a pool of one target, that target.
	TargetLabel = prefix + "target"
	// PoolLabel on a ClusterProfile names the pool of targets behind it
	// (TargetCluster.Profile).
	PoolLabel = prefix + "pool"
	// AccessFinalizer is the finalizer the platform keeps on AccessRequests until it has
	// removed what it created for them.
	AccessFinalizer = prefix + "access"
	// ConditionGranted is the condition type on ClusterRequests and AccessRequests that
	// explains the phase: True when granted, False with a reason otherwise.
	ConditionGranted = "Granted"

	// AccessIDLabel marks every object created for one AccessRequest, on the target and
	// on the platform, with a hash of the request's namespace and name.
	AccessIDLabel = prefix + "access-id"
	// tokenAnchorLabel marks the Secrets on a target that short-lived tokens are bound to.
	tokenAnchorLabel = prefix + "token-anchor"
	// expiresAtAnnotation on an anchor Secret holds when its tokens must stop working.
	expiresAtAnnotation = prefix + "expires-at"
)

// Condition reasons used besides the openMCP ones.
const (
	ReasonGranted  = "Granted"
	ReasonDenied   = "Denied"
	ReasonDelayed  = "Delayed"
	ReasonNoTarget = "NoTargetCluster"
	// ReasonClusterNotAssigned means the Cluster of an AccessRequest belongs to a pool
	// of targets and is not assigned one yet; the request waits for it.
	ReasonClusterNotAssigned = "ClusterNotAssigned"
	// ReasonTargetClusterInteractionProblem means a call to a target API server failed.
	ReasonTargetClusterInteractionProblem = "TargetClusterInteractionProblem"
	ReasonUnsupported                     = "Unsupported"
)

// Options configure a Platform. Zero fields take the Default* values.
type Options struct {
	// Namespace on the platform cluster holding the Cluster objects of shared targets.
	Namespace string
	// AccessNamespace on the target clusters holding the ServiceAccounts created for
	// AccessRequests.
	AccessNamespace string
	// Profile is written into spec.profile of Cluster objects and the profile label of
	// AccessRequests.
	Profile string
	// ProviderName is the value of the clusters.openmcp.cloud/provider label on Cluster
	// objects and AccessRequests.
	ProviderName string
	// TokenTTL is the lifetime of minted tokens (capped by an AccessRequest's remaining
	// spec.ttl). Tokens are renewed after 80 % of it.
	TokenTTL time.Duration
	// RetryInterval is how often a request waiting for something outside the platform's
	// control (a target, a referenced object) is looked at again.
	RetryInterval time.Duration
	// MaxConcurrentReconciles per controller.
	MaxConcurrentReconciles int
	// ClusterRequestPolicy and AccessRequestPolicy, when set, decide each request;
	// unset, every request is granted.
	ClusterRequestPolicy ClusterRequestPolicy
	AccessRequestPolicy  AccessRequestPolicy
	// Logger for Start's manager; the controller-runtime global logger when unset.
	Logger logr.Logger
	// ClusterProviderOnly leaves the scheduler's and the access-request controller's
	// parts to the real openmcp-operator running against the same platform cluster and
	// plays only what a cluster provider does there (see the package documentation):
	// ClusterProfiles, Cluster status, and granting the AccessRequests routed to
	// ProviderName. ClusterRequestPolicy is not asked then.
	ClusterProviderOnly bool
}

// Platform answers ClusterRequests and AccessRequests on a platform cluster. Create it
// with New, add targets with AddCluster, and run it with Start or SetupWithManager.
type Platform struct {
	cfg    *rest.Config
	opts   Options
	scheme *runtime.Scheme
	// c reads and writes the platform cluster directly, bypassing any cache: the
	// reconcilers must see their own previous writes, or they would grant twice.
	c client.Client
	// cache reads what a reconcile only consults (the ClusterRequest and Cluster
	// behind an AccessRequest): the manager's cache once SetupWithManager ran, c
	// before. Hundreds of AccessRequests re-reading them directly on every reconcile
	// keep the platform's API server busy (docs/design/measured.md).
	cache client.Reader

	// sharedMu serialises the changes of a shared Cluster's finalizers in this
	// process: every ClusterRequest of a shared target adds its finalizer to the one
	// Cluster, and concurrent reconciles otherwise mostly conflict
	// (docs/design/measured.md).
	sharedMu sync.Mutex
	// assignMu serialises the choice of a target for a Cluster of a pool of several
	// targets, so that each choice counts the ones before.
	assignMu sync.Mutex

	mu      sync.RWMutex
	targets []*target
}

// New returns a Platform for the platform cluster behind platformCfg, which must have
// the openMCP CRDs installed (see InstallCRDs).
func New(platformCfg *rest.Config, opts Options) (*Platform, error) {
	if platformCfg == nil {
		return nil, errors.New("localplatform: platform rest config is nil")
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.AccessNamespace == "" {
		opts.AccessNamespace = DefaultAccessNamespace
	}
	if opts.Profile == "" {
		opts.Profile = DefaultProfile
	}
	if opts.ProviderName == "" {
		opts.ProviderName = DefaultProviderName
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	scheme := NewScheme()
	c, err := client.New(rest.CopyConfig(platformCfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("localplatform: creating platform client: %w", err)
	}
	return &Platform{cfg: rest.CopyConfig(platformCfg), opts: opts, scheme: scheme, c: c, cache: c}, nil
}

// Options returns the effective options, defaults filled in.
func (p *Platform) Options() Options { return p.opts }

// Start runs the platform's controllers in a manager of its own until ctx is done.
func (p *Platform) Start(ctx context.Context) error {
	logger := p.opts.Logger
	if logger.GetSink() == nil {
		logger = ctrl.Log.WithName("localplatform")
	}
	mgr, err := ctrl.NewManager(p.cfg, manager.Options{
		Scheme: p.scheme,
		Logger: logger,
		// Several platforms may run in one test binary: no listeners, no leader election.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("localplatform: creating manager: %w", err)
	}
	if err := p.SetupWithManager(mgr); err != nil {
		return err
	}
	if p.opts.ClusterProviderOnly {
		if err := p.EnsureClusterProfiles(ctx); err != nil {
			return err
		}
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("localplatform: running manager: %w", err)
	}
	return nil
}

// SetupWithManager adds the platform's controllers to mgr, which must run against the
// platform cluster. The openMCP cluster types are added to mgr's scheme if missing.
func (p *Platform) SetupWithManager(mgr ctrl.Manager) error {
	if !mgr.GetScheme().Recognizes(clustersv1alpha1.GroupVersion.WithKind("AccessRequest")) {
		if err := clustersv1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
			return fmt.Errorf("localplatform: adding openMCP types to the manager's scheme: %w", err)
		}
	}
	opts := controller.Options{
		MaxConcurrentReconciles: p.opts.MaxConcurrentReconciles,
		// Tests run several platforms in one process; names need not be unique.
		SkipNameValidation: ptr.To(true),
	}
	if p.opts.ClusterProviderOnly {
		p.cache = mgr.GetClient()
		return p.setupClusterProvider(mgr, opts)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("localplatform-clusterrequest").
		For(&clustersv1alpha1.ClusterRequest{}).
		WithOptions(opts).
		Complete(reconcile.Func(p.reconcileClusterRequest)); err != nil {
		return fmt.Errorf("localplatform: setting up ClusterRequest controller: %w", err)
	}

	// An AccessRequest referring to a ClusterRequest waits for it to be granted, so a
	// change of a ClusterRequest wakes the AccessRequests referring to it. The cache is
	// good enough here: this only decides whom to wake.
	cache := mgr.GetClient()
	p.cache = cache
	requestsFor := func(ctx context.Context, obj client.Object) []reconcile.Request {
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := cache.List(ctx, ars); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing AccessRequests to wake")
			return nil
		}
		var reqs []reconcile.Request
		for _, ar := range ars.Items {
			ref := ar.Spec.RequestRef
			if ar.Spec.ClusterRef == nil && ref != nil && ref.Name == obj.GetName() && ref.Namespace == obj.GetNamespace() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ar)})
			}
		}
		return reqs
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("localplatform-accessrequest").
		For(&clustersv1alpha1.AccessRequest{}).
		Watches(&clustersv1alpha1.ClusterRequest{}, handler.EnqueueRequestsFromMapFunc(requestsFor)).
		WithOptions(opts).
		Complete(reconcile.Func(p.reconcileAccessRequest)); err != nil {
		return fmt.Errorf("localplatform: setting up AccessRequest controller: %w", err)
	}
	return nil
}

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{}
	ns.Name = name
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %q: %w", name, err)
	}
	return nil
}

// getLive reads the object a reconcile is for: found is false, with no error, when it
// is gone, which ends that reconcile quietly.
func getLive(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) (found bool, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("getting %T %s: %w", obj, key, err)
	}
	return true, nil
}
