package onboarding

import (
	"context"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	libutils "github.com/openmcp-project/openmcp-operator/lib/utils"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/engine"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/workload"
)

// ClusterName is the onboarding cluster's name in the multicluster manager.
const ClusterName = "onboarding"

// MCPRegistrationID names the end-user registration; its AccessRequests end in "--mcp".
const MCPRegistrationID = "mcp"

// Options configure standard mode.
type Options struct {
	// ProviderName names requests and labels them as managed by the provider.
	ProviderName string
	// Permissions the provider needs on the tenant's MCP.
	Permissions workload.Permissions
	// Scheme of the MCP client.
	Scheme *runtime.Scheme
	// RetryInterval while waiting for a grant.
	RetryInterval time.Duration
	// Tune adjusts the MCP client's REST config.
	Tune func(*rest.Config)
}

// Provider wraps the onboarding cluster as a multicluster provider with one cluster.
// The caller adds the returned cluster to the manager so that its cache runs.
func Provider(cfg *rest.Config, scheme *runtime.Scheme) (*single.Provider, ctrlcluster.Cluster, error) {
	cl, err := ctrlcluster.New(cfg, func(o *ctrlcluster.Options) { o.Scheme = scheme })
	if err != nil {
		return nil, nil, err
	}
	return single.New(ClusterName, cl), cl, nil
}

// Labels are openMCP's onboarding labels, which map a request back to its object.
func Labels(req reconcile.Request) map[string]string {
	return map[string]string{
		openmcpconst.OnboardingNameLabel:      req.Name,
		openmcpconst.OnboardingNamespaceLabel: req.Namespace,
	}
}

// Tenancy is standard mode for the engine.
type Tenancy[T provider.Object] struct {
	mcp *access.Requester
}

var _ engine.Tenancy[provider.Object] = &Tenancy[provider.Object]{}

// NewTenancy returns standard mode, ordering MCP access with the platform client.
func NewTenancy[T provider.Object](platform client.Client, opts Options) *Tenancy[T] {
	reg := advanced.ExistingClusterRequest(MCPRegistrationID, MCPRegistrationID, func(req reconcile.Request, _ ...any) (*commonapi.ObjectReference, error) {
		ns, err := libutils.StableMCPNamespace(req.Name, req.Namespace)
		if err != nil {
			return nil, err
		}
		// The ControlPlane's own ClusterRequest is named like the ControlPlane.
		return &commonapi.ObjectReference{Name: req.Name, Namespace: ns}, nil
	}).
		WithNamespaceGenerator(access.NamespaceFromIdentity).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{Permissions: opts.Permissions.Rules, RoleRefs: opts.Permissions.RoleRefs}).
		WithScheme(opts.Scheme).
		Build()
	return &Tenancy[T]{mcp: access.New(platform, access.Options{
		ControllerName: opts.ProviderName,
		Registration:   reg,
		Labels:         Labels,
		RetryInterval:  opts.RetryInterval,
		Scheme:         opts.Scheme,
		DeniedReason:   v1alpha1.ReasonAccessDenied,
		WaitingReason:  v1alpha1.ReasonWaitingForAccess,
		Tune:           opts.Tune,
	})}
}

// Mode is standard.
func (*Tenancy[T]) Mode() cluster.Mode { return cluster.ModeStandard }

// Target: the object is named after its ControlPlane, so its key is the tenant.
func (*Tenancy[T]) Target(clusterName string, cl ctrlcluster.Cluster, obj T) engine.Target[T] {
	id := cluster.StandardIdentity(obj.GetNamespace(), obj.GetName())
	return engine.Target[T]{
		ClusterName: clusterName, Cluster: cl, Object: obj, Identity: id,
		Key: access.Key{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}, Identity: id},
	}
}

// Admit admits every object: one per ControlPlane by naming convention.
func (*Tenancy[T]) Admit(context.Context, engine.Target[T]) error { return nil }

// EndUser orders access to the tenant's MCP.
func (t *Tenancy[T]) EndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	return t.mcp.Ensure(ctx, tg.Key)
}

// LookupEndUser returns existing MCP access.
func (t *Tenancy[T]) LookupEndUser(ctx context.Context, tg engine.Target[T]) (*cluster.Access, error) {
	return t.mcp.Lookup(ctx, tg.Key)
}

// ReleaseEndUser deletes the MCP AccessRequest.
func (t *Tenancy[T]) ReleaseEndUser(ctx context.Context, tg engine.Target[T]) (bool, error) {
	return t.mcp.Release(ctx, tg.Key)
}

// RequestsFor maps the onboarding labels back to the object.
func (*Tenancy[T]) RequestsFor(_ context.Context, labels map[string]string, _ engine.ClusterLister) []mcreconcile.Request {
	name := labels[openmcpconst.OnboardingNameLabel]
	if name == "" {
		return nil
	}
	return []mcreconcile.Request{{
		ClusterName: multicluster.ClusterName(ClusterName),
		Request:     reconcile.Request{NamespacedName: types.NamespacedName{Namespace: labels[openmcpconst.OnboardingNamespaceLabel], Name: name}},
	}}
}
