package engine

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Target is one Service object as a mode sees it.
type Target[T provider.Object] struct {
	// ClusterName is the multicluster name of the cluster holding the object.
	ClusterName string
	// Cluster holds the object (the onboarding cluster, a workspace through the virtual
	// workspace).
	Cluster ctrlcluster.Cluster
	// Object is the Service object.
	Object T
	// Identity is the tenant's identity.
	Identity cluster.Identity
	// Key names the tenant's platform-side requests.
	Key access.Key
}

// ObjectTarget is the Target of a mode in which each object is its own tenant
// (standard and platform-service mode): the tenant's requests are keyed by the object.
func ObjectTarget[T provider.Object](clusterName string, cl ctrlcluster.Cluster, obj T, id cluster.Identity) Target[T] {
	return Target[T]{
		ClusterName: clusterName, Cluster: cl, Object: obj, Identity: id,
		Key: access.Key{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}, Identity: id},
	}
}

// Tenancy is what differs between modes.
type Tenancy[T provider.Object] interface {
	// Mode names the mode.
	Mode() cluster.Mode
	// Target identifies the tenant behind an object.
	Target(clusterName string, cl ctrlcluster.Cluster, obj T) Target[T]
	// Admit decides whether the object may be served; a rejection is an
	// *access.WaitingError whose message the tenant reads.
	Admit(ctx context.Context, t Target[T]) error
	// EndUser returns access to the end-user cluster, or an *access.WaitingError.
	EndUser(ctx context.Context, t Target[T]) (*cluster.Access, error)
	// LookupEndUser returns the end-user access if it exists, without ordering it (used
	// while deleting); nil when there is none.
	LookupEndUser(ctx context.Context, t Target[T]) (*cluster.Access, error)
	// ReleaseEndUser removes the end-user access; false while still in progress.
	ReleaseEndUser(ctx context.Context, t Target[T]) (bool, error)
	// RequestsFor maps a platform-side request (by its labels) back to the Service
	// objects it serves.
	RequestsFor(ctx context.Context, labels map[string]string, clusters ClusterLister) []mcreconcile.Request
}

// WorkerTenancy is implemented by a mode that can give the provider's worker an
// end-user credential of its own, when the provider declared the worker's rights
// apart from its own. Its ReleaseEndUser removes both credentials.
type WorkerTenancy[T provider.Object] interface {
	// EndUserWorker returns the worker's access to the end-user cluster, or an
	// *access.WaitingError; nil when the worker shares the provider's.
	EndUserWorker(ctx context.Context, t Target[T]) (*cluster.Access, error)
	// RevokeWorker starts revoking the worker's own credential, without waiting for
	// the revocation to complete. The engine calls it once the provider's Delete has
	// finished, when the worker is gone and its credential serves nobody, ahead of the
	// releases that wait on the platform; ReleaseEndUser still waits for it.
	RevokeWorker(ctx context.Context, t Target[T]) error
}

// WorkloadAccess is how a mode reaches a tenant's workload cluster. The usual one is an
// *access.Requester ordering a shared workload cluster from the platform; platform-service
// mode grants the platform cluster itself.
type WorkloadAccess interface {
	// Ensure orders the access if needed and returns it once usable, or an
	// *access.WaitingError.
	Ensure(ctx context.Context, key access.Key) (*cluster.Access, error)
	// Lookup returns the access if it exists, without ordering it (used while
	// deleting); nil when there is none.
	Lookup(ctx context.Context, key access.Key) (*cluster.Access, error)
	// Release removes the access; false while still in progress.
	Release(ctx context.Context, key access.Key) (bool, error)
}

var _ WorkloadAccess = &access.Requester{}

// ClusterLister lists the objects of the engine's type in the engaged clusters.
type ClusterLister interface {
	// List returns requests for every object in the named cluster, or in every engaged
	// cluster when name is empty.
	List(ctx context.Context, name string) []mcreconcile.Request
	// Get returns an engaged cluster.
	Get(name string) (ctrlcluster.Cluster, bool)
}
