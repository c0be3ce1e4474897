package workload

import (
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
)

// RegistrationID names the workload registration; its requests end in "--wl".
const RegistrationID = "workload"

// Options configure an Orderer.
type Options struct {
	// ControllerName is the provider name (request names and managed-by label).
	ControllerName string
	// Permissions on the workload cluster.
	Permissions cluster.Permissions
	// Scheme of the workload client.
	Scheme *runtime.Scheme
	// Labels identifies the tenant on the requests (mode-specific).
	Labels func(reconcile.Request) map[string]string
	// RetryInterval while waiting for a grant.
	RetryInterval time.Duration
	// GrantTimeout: see access.Options.
	GrantTimeout time.Duration
	// Tune adjusts the workload client's REST config.
	Tune func(*rest.Config)
	// Purpose of the ClusterRequest; empty: workload. A further cluster a provider
	// declares (builder.Builder.AdditionalCluster) is ordered with its own.
	Purpose string
	// Spec, when set, is the ClusterRequest's spec for a tenant instead of Purpose
	// alone, from the data its access.Key carries (the library's generators).
	Spec func(req reconcile.Request, data ...any) (*clustersv1alpha1.ClusterRequestSpec, error)
	// ID and Suffix name the registration and end its requests' names; empty:
	// RegistrationID and "wl". A provider taking over from opencontrolplane-runtime
	// keeps its old ones (package migration).
	ID, Suffix string
	// Adopt: see access.Options.Adopt.
	Adopt bool
	// Namespaces: see access.Options.Namespaces.
	Namespaces *access.Namespaces
}

// NewOrderer returns a Requester ordering workload clusters.
func NewOrderer(platform client.Client, opts Options) *access.Requester {
	id, suffix := opts.ID, opts.Suffix
	if id == "" {
		id = RegistrationID
	}
	if suffix == "" {
		suffix = "wl"
	}
	purpose := opts.Purpose
	if purpose == "" {
		purpose = clustersv1alpha1.PURPOSE_WORKLOAD
	}
	spec := advanced.ClusterRequestSpecGenerator(advanced.StaticClusterRequestSpecGenerator(&clustersv1alpha1.ClusterRequestSpec{Purpose: purpose}))
	if opts.Spec != nil {
		spec = opts.Spec
	}
	reg := advanced.NewClusterRequest(id, suffix,
		spec).
		WithNamespaceGenerator(access.NamespaceFromIdentity).
		WithTokenAccess(&clustersv1alpha1.TokenConfig{Permissions: opts.Permissions.Rules, RoleRefs: opts.Permissions.RoleRefs}).
		WithScheme(opts.Scheme).
		Build()
	return access.New(platform, access.Options{
		ControllerName:   opts.ControllerName,
		Registration:     reg,
		Labels:           opts.Labels,
		RetryInterval:    opts.RetryInterval,
		Scheme:           opts.Scheme,
		DeniedReason:     v1alpha1.ReasonWorkloadDenied,
		WaitingReason:    v1alpha1.ReasonWaitingForWorkload,
		NotGrantedReason: v1alpha1.ReasonWorkloadNotGranted,
		GrantTimeout:     opts.GrantTimeout,
		Tune:             opts.Tune,
		Adopt:            opts.Adopt,
		Namespaces:       opts.Namespaces,
	})
}
