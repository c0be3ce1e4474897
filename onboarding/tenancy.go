package onboarding

import (
	"context"
	"fmt"
	"sync"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// ClusterName is the onboarding cluster's name in the multicluster manager.
const ClusterName = "onboarding"

// MCPRegistrationID names the end-user registration; its AccessRequests end in "--mcp".
const MCPRegistrationID = "mcp"

// WorkerRegistrationID names the registration of the worker's own end-user access
// (ModeOptions.WorkerPermissions); its AccessRequests end in "--mcp-worker".
const WorkerRegistrationID = "mcp-worker"

// ModeOptions configure standard mode.
type ModeOptions struct {
	// ProviderName names requests and labels them as managed by the provider.
	ProviderName string
	// Permissions the provider needs on the tenant's MCP.
	Permissions cluster.Permissions
	// WorkerPermissions, when set, are what the provider's worker may do on the
	// tenant's MCP, ordered as an AccessRequest of their own; nil shares the
	// provider's.
	WorkerPermissions *cluster.Permissions
	// Scheme of the MCP client.
	Scheme *runtime.Scheme
	// RetryInterval while waiting for a grant.
	RetryInterval time.Duration
	// GrantTimeout: see access.Options.
	GrantTimeout time.Duration
	// Tune adjusts the MCP client's REST config.
	Tune func(*rest.Config)
	// MCPID and MCPSuffix name the end-user registration and end its requests' names;
	// empty: MCPRegistrationID for both. A provider taking over from
	// opencontrolplane-runtime keeps its old ones (package migration).
	MCPID, MCPSuffix string
	// Adopt: see access.Options.Adopt.
	Adopt bool
	// Namespaces: see access.Options.Namespaces; the builder shares one with the
	// mode's workload orderers.
	Namespaces *access.Namespaces
}

// Labels are openMCP's onboarding labels, which map a request back to its object.
func Labels(req reconcile.Request) map[string]string {
	return map[string]string{
		openmcpconst.OnboardingNameLabel:      req.Name,
		openmcpconst.OnboardingNamespaceLabel: req.Namespace,
	}
}

// tenancy is standard mode for the engine.
type tenancy[T provider.Object] struct {
	mcp      *access.Requester
	worker   *access.Requester // nil without ModeOptions.WorkerPermissions
	platform client.Client
	retry    time.Duration

	mu sync.Mutex
	// missing counts, per tenant, the looks in a row that found no ControlPlane
	// (controlPlaneExists).
	missing map[types.NamespacedName]int
}

var (
	_ engine.Tenancy[provider.Object]       = &tenancy[provider.Object]{}
	_ engine.WorkerTenancy[provider.Object] = &tenancy[provider.Object]{}
	_ engine.Recorder                       = &tenancy[provider.Object]{}
)

// controlPlaneRequest is the ClusterRequest of the ControlPlane an object is named
// after: openMCP names it like the ControlPlane, in the ControlPlane's platform
// namespace. The MCP AccessRequest refers to it.
func controlPlaneRequest(req reconcile.Request) (client.ObjectKey, error) {
	ns, err := libutils.StableMCPNamespace(req.Name, req.Namespace)
	if err != nil {
		return client.ObjectKey{}, err
	}
	return client.ObjectKey{Namespace: ns, Name: req.Name}, nil
}

// newTenancy returns standard mode, ordering MCP access with the platform client (the
// mode's cached client: it also reads the ControlPlanes' ClusterRequests).
func newTenancy[T provider.Object](platform client.Client, opts ModeOptions) *tenancy[T] {
	retry := opts.RetryInterval
	if retry <= 0 {
		retry = 10 * time.Second
	}
	t := &tenancy[T]{platform: platform, retry: retry, missing: map[types.NamespacedName]int{},
		mcp: mcpRequester(platform, opts, orDefault(opts.MCPID, MCPRegistrationID), orDefault(opts.MCPSuffix, MCPRegistrationID), opts.Permissions)}
	if opts.WorkerPermissions != nil {
		t.worker = mcpRequester(platform, opts, WorkerRegistrationID, WorkerRegistrationID, *opts.WorkerPermissions)
	}
	return t
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// mcpRequester orders token access with perms to the ControlPlane an object is named
// after, under the registration id, its requests' names ending in suffix.
func mcpRequester(platform client.Client, opts ModeOptions, id, suffix string, perms cluster.Permissions) *access.Requester {
	reg := advanced.ExistingClusterRequest(id, suffix, func(req reconcile.Request, _ ...any) (*commonapi.ObjectReference, error) {
		key, err := controlPlaneRequest(req)
		if err != nil {
			return nil, err
		}
		return &commonapi.ObjectReference{Name: key.Name, Namespace: key.Namespace}, nil
	}).
		WithNamespaceGenerator(access.NamespaceFromIdentity).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{Permissions: perms.Rules, RoleRefs: perms.RoleRefs}).
		WithScheme(opts.Scheme).
		Build()
	return access.New(platform, access.Options{
		ControllerName:   opts.ProviderName,
		Registration:     reg,
		Labels:           Labels,
		RetryInterval:    opts.RetryInterval,
		Scheme:           opts.Scheme,
		DeniedReason:     v1alpha1.ReasonAccessDenied,
		WaitingReason:    v1alpha1.ReasonWaitingForAccess,
		NotGrantedReason: v1alpha1.ReasonAccessNotGranted,
		GrantTimeout:     opts.GrantTimeout,
		Tune:             opts.Tune,
		Adopt:            opts.Adopt,
		Namespaces:       opts.Namespaces,
	})
}

// Mode is standard.
func (*tenancy[T]) Mode() cluster.Mode { return cluster.ModeStandard }

// Target: the object is named after its ControlPlane, so its key is the tenant.
func (*tenancy[T]) Target(clusterName string, cl ctrlcluster.Cluster, obj T) engine.Target[T] {
	return engine.ObjectTarget(clusterName, cl, obj, cluster.StandardIdentity(obj.GetNamespace(), obj.GetName()))
}

// Admit admits every object: one per ControlPlane by naming convention.
func (*tenancy[T]) Admit(context.Context, engine.Target[T]) error { return nil }

// EndUser orders access to the tenant's MCP, once the ControlPlane exists.
func (t *tenancy[T]) EndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	if err := t.controlPlaneExists(ctx, tg.Key.Request); err != nil {
		return nil, err
	}
	return t.mcp.Ensure(ctx, tg.Key)
}

// maxControlPlaneRetry caps the wait between looks for a missing ControlPlane.
const maxControlPlaneRetry = 5 * time.Minute

// controlPlaneExists returns nil when the ControlPlane the object is named after has
// its ClusterRequest on the platform, and otherwise a WaitingError with reason
// ControlPlaneNotFound that says so. Without the check an object named after no
// ControlPlane ordered an AccessRequest that the platform could never grant (the
// openmcp-operator leaves it Pending, naming the missing ClusterRequest at most in its
// log), showed "waiting for the platform" for ever, and the clusteraccess library
// created a platform namespace for it that nothing removed. Nothing is ordered, so
// nothing is left. The ControlPlane's ClusterRequest is not the runtime's, so no watch
// brings the object back when it appears: it is looked at again after RetryInterval,
// doubling up to five minutes.
func (t *tenancy[T]) controlPlaneExists(ctx context.Context, req reconcile.Request) error {
	key, err := controlPlaneRequest(req)
	if err != nil {
		return fmt.Errorf("ControlPlane %s: %w", req.NamespacedName, err)
	}
	err = t.platform.Get(ctx, key, &clustersv1alpha1.ClusterRequest{})
	if err == nil {
		t.mu.Lock()
		delete(t.missing, req.NamespacedName)
		t.mu.Unlock()
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ClusterRequest %s of ControlPlane %s: %w", key, req.NamespacedName, err)
	}
	t.mu.Lock()
	n := t.missing[req.NamespacedName]
	t.missing[req.NamespacedName] = n + 1
	t.mu.Unlock()
	return &access.WaitingError{
		Reason:       v1alpha1.ReasonControlPlaneNotFound,
		Final:        true,
		RequeueAfter: max(min(t.retry<<min(n, 16), maxControlPlaneRetry), t.retry),
		// The same words on every look: a changing message would cost a status write each.
		Message: fmt.Sprintf("ControlPlane %s does not exist: the platform has no ClusterRequest %s for it, so nothing was ordered. "+
			"The object is served once the ControlPlane exists; otherwise delete it and use the name of an existing ControlPlane in namespace %s",
			req.NamespacedName, key, req.Namespace),
	}
}

// EndUserWorker orders the worker's own access to the tenant's MCP
// (engine.WorkerTenancy); nil when the worker shares the provider's.
func (t *tenancy[T]) EndUserWorker(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	if t.worker == nil {
		return nil, nil
	}
	return t.worker.Ensure(ctx, tg.Key)
}

// RevokeWorker deletes the worker's own AccessRequest to the tenant's MCP
// (engine.WorkerTenancy), without waiting for the platform to revoke it;
// ReleaseEndUser waits.
func (t *tenancy[T]) RevokeWorker(ctx context.Context, tg engine.Target[T]) error {
	if t.worker == nil {
		return nil
	}
	_, err := t.worker.Release(ctx, tg.Key)
	return err
}

// LookupEndUser returns existing MCP access.
func (t *tenancy[T]) LookupEndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	return t.mcp.Lookup(ctx, tg.Key)
}

// Record keeps value in an annotation of the tenant's MCP AccessRequest
// (engine.Recorder): the engine's record of the object, for a provider without
// workload cluster.
func (t *tenancy[T]) Record(ctx context.Context, key access.Key, annotation, value string) error {
	return t.mcp.Record(ctx, key, annotation, value)
}

// ReleaseEndUser deletes the MCP AccessRequests: the worker's, then the provider's.
func (t *tenancy[T]) ReleaseEndUser(ctx context.Context, tg engine.Target[T]) (bool, error) {
	if t.worker != nil {
		if done, err := t.worker.Release(ctx, tg.Key); err != nil || !done {
			return false, err
		}
	}
	done, err := t.mcp.Release(ctx, tg.Key)
	if done {
		t.mu.Lock()
		delete(t.missing, tg.Key.Request.NamespacedName)
		t.mu.Unlock()
	}
	return done, err
}

// RequestsFor maps the onboarding labels back to the object.
func (*tenancy[T]) RequestsFor(_ context.Context, labels map[string]string, _ engine.ClusterLister) []mcreconcile.Request {
	name := labels[openmcpconst.OnboardingNameLabel]
	if name == "" {
		return nil
	}
	return []mcreconcile.Request{{
		ClusterName: multicluster.ClusterName(ClusterName),
		Request:     reconcile.Request{NamespacedName: types.NamespacedName{Namespace: labels[openmcpconst.OnboardingNamespaceLabel], Name: name}},
	}}
}
