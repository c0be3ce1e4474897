package localplatform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/api/crds"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
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
	// (otherwise the first target added with the purpose is used). The platform also
	// sets it on AccessRequests to remember on which target it created their
	// ServiceAccount and RBAC.
	TargetAnnotation = prefix + "target"
	// TargetLabel on a Cluster object names the target cluster it describes.
	TargetLabel = prefix + "target"
	// AccessFinalizer is the finalizer the platform keeps on AccessRequests until it has
	// removed what it created for them.
	AccessFinalizer = prefix + "access"
	// ConditionGranted is the condition type on ClusterRequests and AccessRequests that
	// explains the phase: True when granted, False with a reason otherwise.
	ConditionGranted = "Granted"

	// accessIDLabel marks every object created for one AccessRequest, on the target and
	// on the platform, with a hash of the request's namespace and name.
	accessIDLabel = prefix + "access-id"
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
	// ReasonTargetClusterInteractionProblem means a call to a target API server failed.
	ReasonTargetClusterInteractionProblem = "TargetClusterInteractionProblem"
	ReasonUnsupported                     = "Unsupported"
)

// Decision is a policy's answer to a request. The zero value grants it.
type Decision struct {
	// Deny makes the request Denied, with Reason (default "Denied") and Message in its
	// Granted condition.
	Deny bool
	// DelayUntil keeps the request Pending until this time, when the policy is asked
	// again. Ignored when Deny is set.
	DelayUntil time.Time
	Reason     string
	Message    string
}

// Denied returns a Decision that denies a request.
func Denied(reason, message string) Decision {
	return Decision{Deny: true, Reason: reason, Message: message}
}

// Delayed returns a Decision that keeps a request Pending until t.
func Delayed(until time.Time) Decision {
	return Decision{DelayUntil: until}
}

// ClusterRequestPolicy decides a ClusterRequest that is not granted yet. It is asked on
// every reconciliation until the request is granted (a denied request is reconciled
// again when it changes, a delayed one when the delay ends); a granted request stays
// granted.
type ClusterRequestPolicy func(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) Decision

// AccessRequestPolicy decides an AccessRequest whose current generation is not granted
// yet, with the same timing as ClusterRequestPolicy. It is not asked again for token
// renewals of a granted generation. Denying a request removes what it was granted.
type AccessRequestPolicy func(ctx context.Context, ar *clustersv1alpha1.AccessRequest) Decision

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
}

// TargetCluster is an API server the platform hands out access to.
type TargetCluster struct {
	// Name identifies the target; it names the Cluster object of a shared target and is
	// used as a label value, so it must be a DNS-1123 label.
	Name string
	// Purposes this target serves, e.g. "workload" or "mcp".
	Purposes []string
	// Tenancy is Shared (the default: one Cluster object for all requests) or Exclusive
	// (one Cluster object per request, all backed by this API server).
	Tenancy clustersv1alpha1.Tenancy
	// Config with admin rights on the target; alternatively Kubeconfig.
	Config     *rest.Config
	Kubeconfig []byte
}

// target is a TargetCluster ready for use.
type target struct {
	TargetCluster
	// host is the URL written into Cluster objects and kubeconfigs.
	host string
	// caData is the CA bundle of the target's serving certificate.
	caData []byte
	client client.Client
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
	// before. Hundreds of AccessRequests re-read them directly on every reconcile,
	// which kept the platform's API server busy in the 500-workspace benchmark.
	cache client.Reader

	// sharedMu serialises the changes of a shared Cluster's finalizers in this
	// process: every ClusterRequest of a shared target adds its finalizer to the one
	// Cluster, and concurrent reconciles otherwise mostly conflict (2,331 conflicts
	// and as many re-reads for 500 requests in the benchmark).
	sharedMu sync.Mutex

	mu      sync.RWMutex
	targets []*target
}

// NewScheme returns a scheme with the Kubernetes built-in types and openMCP's
// clusters.openmcp.cloud/v1alpha1 types, what a manager running a Platform needs.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Both only fail on programming errors (conflicting registrations).
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("adding client-go types to scheme: %v", err))
	}
	if err := clustersv1alpha1.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("adding openMCP cluster types to scheme: %v", err))
	}
	return s
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

// AddCluster makes a target cluster available to requests. It may be called while the
// platform runs; requests waiting for a target with its purpose are served within
// Options.RetryInterval.
func (p *Platform) AddCluster(tc TargetCluster) error {
	if errs := validation.IsDNS1123Label(tc.Name); len(errs) > 0 {
		return fmt.Errorf("localplatform: target name %q is invalid: %s", tc.Name, strings.Join(errs, "; "))
	}
	if len(tc.Purposes) == 0 {
		return fmt.Errorf("localplatform: target %q has no purposes", tc.Name)
	}
	switch tc.Tenancy {
	case "":
		tc.Tenancy = clustersv1alpha1.TENANCY_SHARED
	case clustersv1alpha1.TENANCY_SHARED, clustersv1alpha1.TENANCY_EXCLUSIVE:
	default:
		return fmt.Errorf("localplatform: target %q has unknown tenancy %q", tc.Name, tc.Tenancy)
	}
	var cfg *rest.Config
	switch {
	case tc.Config != nil && len(tc.Kubeconfig) > 0:
		return fmt.Errorf("localplatform: target %q sets both Config and Kubeconfig", tc.Name)
	case tc.Config != nil:
		cfg = rest.CopyConfig(tc.Config)
	case len(tc.Kubeconfig) > 0:
		var err error
		if cfg, err = clientcmd.RESTConfigFromKubeConfig(tc.Kubeconfig); err != nil {
			return fmt.Errorf("localplatform: parsing kubeconfig of target %q: %w", tc.Name, err)
		}
	default:
		return fmt.Errorf("localplatform: target %q has neither Config nor Kubeconfig", tc.Name)
	}
	// Kubeconfigs handed out must be self-contained, so a CA given as a file is read now.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return fmt.Errorf("localplatform: loading TLS files of target %q: %w", tc.Name, err)
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return fmt.Errorf("localplatform: server URL of target %q: %w", tc.Name, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: p.scheme})
	if err != nil {
		return fmt.Errorf("localplatform: creating client for target %q: %w", tc.Name, err)
	}
	tc.Config, tc.Kubeconfig = cfg, nil
	tc.Purposes = slices.Clone(tc.Purposes)
	t := &target{
		TargetCluster: tc,
		host:          strings.TrimSuffix(u.String(), "/"),
		caData:        cfg.CAData,
		client:        c,
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, existing := range p.targets {
		if existing.Name == tc.Name {
			return fmt.Errorf("localplatform: target %q already added", tc.Name)
		}
	}
	p.targets = append(p.targets, t)
	return nil
}

// target returns the target with the given name, or nil.
func (p *Platform) target(name string) *target {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, t := range p.targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// targetFor returns the first target serving purpose, or nil.
func (p *Platform) targetFor(purpose string) *target {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, t := range p.targets {
		if slices.Contains(t.Purposes, purpose) {
			return t
		}
	}
	return nil
}

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

// RegisterControlPlane creates on the platform cluster what openMCP creates for the
// ControlPlane name/namespace: the namespace utils.StableMCPNamespace(name, namespace)
// and in it a ClusterRequest named name with purpose "mcp", granted with a Cluster
// object (named like the request, in that namespace) for the target targetName. The
// target must have been added with purpose "mcp". Policies are not asked: the platform
// itself created the request. It works whether or not the platform runs and returns
// once the request is granted.
func (p *Platform) RegisterControlPlane(ctx context.Context, name, namespace, targetName string) error {
	t := p.target(targetName)
	if t == nil {
		return fmt.Errorf("localplatform: unknown target %q", targetName)
	}
	if !slices.Contains(t.Purposes, clustersv1alpha1.PURPOSE_MCP) {
		return fmt.Errorf("localplatform: target %q does not serve purpose %q", targetName, clustersv1alpha1.PURPOSE_MCP)
	}
	ns, err := libutils.StableMCPNamespace(name, namespace)
	if err != nil {
		return fmt.Errorf("localplatform: namespace for ControlPlane %s/%s: %w", namespace, name, err)
	}
	if err := ensureNamespace(ctx, p.c, ns); err != nil {
		return fmt.Errorf("localplatform: on the platform cluster: %w", err)
	}

	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = name, ns
	cr.Annotations = map[string]string{TargetAnnotation: targetName}
	// Set right away: a running platform reconciles the new request concurrently.
	cr.Finalizers = []string{clustersv1alpha1.ClusterRequestFinalizer}
	cr.Spec.Purpose = clustersv1alpha1.PURPOSE_MCP
	if err := p.c.Create(ctx, cr); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("localplatform: creating ClusterRequest %s/%s: %w", ns, name, err)
		}
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return fmt.Errorf("localplatform: getting ClusterRequest %s/%s: %w", ns, name, err)
		}
		if got := cr.Annotations[TargetAnnotation]; got != targetName || cr.Spec.Purpose != clustersv1alpha1.PURPOSE_MCP {
			return fmt.Errorf("localplatform: ClusterRequest %s/%s already exists for purpose %q and target %q", ns, name, cr.Spec.Purpose, got)
		}
	}
	// A running platform reconciles the new request at the same time, and many
	// registrations at once contend for the shared Cluster object: read the request
	// again and retry until it is granted (by either), rather than failing on a
	// conflict or on the controller's intermediate Pending.
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, fmt.Errorf("localplatform: getting ClusterRequest %s/%s: %w", ns, name, err)
		}
		if cr.Status.IsGranted() {
			return true, nil
		}
		if _, last = p.ensureClusterRequest(ctx, cr, false); last != nil {
			if apierrors.IsConflict(last) {
				return false, nil
			}
			return false, last
		}
		return cr.Status.IsGranted(), nil
	})
	if err != nil {
		return fmt.Errorf("localplatform: ClusterRequest %s/%s is %s, not granted: %w (last: %v)", ns, name, cr.Status.Phase, err, last)
	}
	return nil
}

// DeregisterControlPlane deletes the ClusterRequest RegisterControlPlane created; the
// running platform then releases its Cluster object. The namespace is left alone, as
// openMCP leaves it to the ControlPlane's deletion.
func (p *Platform) DeregisterControlPlane(ctx context.Context, name, namespace string) error {
	ns, err := libutils.StableMCPNamespace(name, namespace)
	if err != nil {
		return fmt.Errorf("localplatform: namespace for ControlPlane %s/%s: %w", namespace, name, err)
	}
	cr := &clustersv1alpha1.ClusterRequest{}
	cr.Name, cr.Namespace = name, ns
	if err := p.c.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("localplatform: deleting ClusterRequest %s/%s: %w", ns, name, err)
	}
	return nil
}

// CRDs returns the openMCP CRDs that belong on a platform cluster (those labelled
// openmcp.cloud/cluster=platform in openmcp-operator's api module).
func CRDs() ([]*apiextv1.CustomResourceDefinition, error) {
	all, err := crds.CRDs()
	if err != nil {
		return nil, fmt.Errorf("localplatform: reading openMCP CRDs: %w", err)
	}
	var platform []*apiextv1.CustomResourceDefinition
	for _, crd := range all {
		if crd.Labels["openmcp.cloud/cluster"] == "platform" {
			platform = append(platform, crd)
		}
	}
	return platform, nil
}

// InstallCRDs installs (or updates) CRDs() on the cluster behind cfg and waits until
// they are served.
func InstallCRDs(cfg *rest.Config) error {
	platformCRDs, err := CRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: platformCRDs}); err != nil {
		return fmt.Errorf("localplatform: installing openMCP CRDs: %w", err)
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
