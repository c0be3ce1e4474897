package access

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/internal/kubeconfig"
)

// grantedAccess is a full pass of Ensure that ended with the access granted: the
// grants it saw, and when.
type grantedAccess struct {
	ar, cr    grant
	access    *cluster.Access
	checkedAt time.Time
}

// stale says whether the access must be read again at now: at the token's renewal
// time, which the platform's Secret names (its creation and expiration timestamps),
// or recheck after the last read for a Secret that names none. Following the renewal
// rather than a fixed interval costs one Secret read per tenant per renewal period:
// at 10,000 workspaces and a 10-minute interval that was 17 reads a second.
func (g grantedAccess) stale(now time.Time, recheck time.Duration) bool {
	if renew := g.access.RenewAt; !renew.IsZero() {
		return !now.Before(renew)
	}
	return now.Sub(g.checkedAt) >= recheck
}

// grant is what a granted request's access depends on. A request changes for reasons
// that leave its grant as it was (this runtime's record annotation, the platform's
// bookkeeping in its status after the grant, which would make tenants read their
// access Secrets again: docs/design/measured.md), so a poll compares grants, not
// resource versions.
type grant struct {
	uid        types.UID
	generation int64
	// granted holds for a request granted at its generation, not being deleted.
	granted bool
	// to is the Secret an AccessRequest names, the Cluster a ClusterRequest names.
	to string
}

func accessGrant(ar *clustersv1alpha1.AccessRequest) grant {
	if ar == nil {
		return grant{}
	}
	g := grant{uid: ar.UID, generation: ar.Generation,
		granted: ar.Status.IsGranted() && ar.Status.ObservedGeneration == ar.Generation && ar.DeletionTimestamp.IsZero()}
	if ar.Status.SecretRef != nil {
		g.to = ar.Status.SecretRef.Name
	}
	return g
}

func clusterGrant(cr *clustersv1alpha1.ClusterRequest) grant {
	if cr == nil {
		return grant{}
	}
	g := grant{uid: cr.UID, generation: cr.Generation, granted: cr.Status.IsGranted() && cr.DeletionTimestamp.IsZero()}
	if cr.Status.Cluster != nil {
		g.to = cr.Status.Cluster.Namespace + "/" + cr.Status.Cluster.Name
	}
	return g
}

type cachedAccess struct {
	resourceVersion string
	access          *cluster.Access
}

// current returns the tenant's access from memory when nothing it depends on has
// changed since a full pass ended granted: the same AccessRequest (and ClusterRequest)
// with the same grant in the informer cache (grant), before the token's renewal time
// (or, for a credential that names no expiry, within Recheck). A poll of a served object then costs no request to the
// platform; the full pass reads the access Secret past the cache.
func (r *Requester) current(ctx context.Context, key Key) (*cluster.Access, error) {
	if r.opts.Recheck < 0 {
		return nil, nil
	}
	r.mu.Lock()
	g, ok := r.granted[tenantKey(key)]
	r.mu.Unlock()
	now := time.Now()
	if !ok || g.stale(now, r.opts.Recheck) {
		return nil, nil
	}
	ar, err := r.accessRequest(ctx, key)
	if err != nil || accessGrant(ar) != g.ar {
		return nil, nil // the full pass reads and reports it
	}
	if r.opts.Registration.ClusterRequestAvailable() {
		cr, err := r.lib.ClusterRequest(ctx, key.Request, r.opts.Registration.ID(), key.data()...)
		if err != nil || clusterGrant(cr) != g.cr {
			return nil, nil
		}
	}
	return g.access, nil
}

// fromAccessRequest reads the access Secret into a client, reusing the cached one while
// the Secret is unchanged.
func (r *Requester) fromAccessRequest(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*cluster.Access, error) {
	if ar.Status.SecretRef == nil {
		return nil, &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.opts.RetryInterval,
			Message: fmt.Sprintf("AccessRequest %s/%s is granted but names no Secret yet", ar.Namespace, ar.Name)}
	}
	s := &corev1.Secret{}
	if err := r.platform.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, s); err != nil {
		return nil, fmt.Errorf("reading access Secret of AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
	}
	r.mu.Lock()
	c, ok := r.cache[ar.UID]
	r.mu.Unlock()
	if ok && c.resourceVersion == s.ResourceVersion {
		return c.access, nil
	}
	kcfg := s.Data[clustersv1alpha1.SecretKeyKubeconfig]
	if len(kcfg) == 0 {
		return nil, fmt.Errorf("access Secret %s/%s has no %q key", s.Namespace, s.Name, clustersv1alpha1.SecretKeyKubeconfig)
	}
	a, err := FromKubeconfig(kcfg, r.opts.Scheme, r.opts.Tune)
	if err != nil {
		return nil, fmt.Errorf("access Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	a.RenewAt = RenewAt(s.Data)
	// The platform renews the token in this same Secret: a child object naming it
	// (a HelmRelease's kubeConfig.secretRef) follows every renewal.
	a.Secret = &cluster.SecretRef{Namespace: s.Namespace, Name: s.Name, Key: clustersv1alpha1.SecretKeyKubeconfig}
	r.mu.Lock()
	r.cache[ar.UID] = cachedAccess{resourceVersion: s.ResourceVersion, access: a}
	r.mu.Unlock()
	return a, nil
}

// RenewAt is when the platform renews the token of an access Secret: 80 % of the
// lifetime between the Secret's creationTimestamp and expirationTimestamp keys (Unix
// seconds, as openMCP's AccessRequest controller writes them). Zero when either key is
// missing or malformed: such a credential is treated as not expiring.
func RenewAt(data map[string][]byte) time.Time {
	created, err1 := strconv.ParseInt(string(data[clustersv1alpha1.SecretKeyCreationTimestamp]), 10, 64)
	expires, err2 := strconv.ParseInt(string(data[clustersv1alpha1.SecretKeyExpirationTimestamp]), 10, 64)
	if err1 != nil || err2 != nil || expires <= created || created <= 0 {
		return time.Time{}
	}
	return kubeconfig.RenewAt(time.Unix(created, 0), time.Unix(expires, 0))
}

// FromKubeconfig builds an Access from raw kubeconfig bytes.
func FromKubeconfig(kubeconfig []byte, scheme *runtime.Scheme, tune func(*rest.Config)) (*cluster.Access, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		// The parse error can quote the file; never pass it on.
		return nil, fmt.Errorf("kubeconfig does not parse")
	}
	return FromConfig(cfg, kubeconfig, scheme, tune)
}

// FromConfig builds an Access from cfg, the REST config of the raw kubeconfig, which
// the Access keeps for the provider. cfg becomes the Access's own.
func FromConfig(cfg *rest.Config, kubeconfig []byte, scheme *runtime.Scheme, tune func(*rest.Config)) (*cluster.Access, error) {
	if tune != nil {
		tune(cfg)
	}
	c, err := newLazyClient(cfg, scheme)
	if err != nil {
		return nil, fmt.Errorf("creating client for %s: %w", cfg.Host, err)
	}
	return &cluster.Access{Client: c, Config: cfg, Kubeconfig: kubeconfig}, nil
}

// Lookup returns the tenant's access if it was granted, without ordering anything: the
// deletion path uses it so that a tenant being deleted never causes new requests.
func (r *Requester) Lookup(ctx context.Context, key Key) (*cluster.Access, error) {
	ar, err := r.accessRequest(libContext(ctx), key)
	if err != nil {
		return nil, fmt.Errorf("reading AccessRequest: %w", err)
	}
	if ar == nil || !ar.DeletionTimestamp.IsZero() || !ar.Status.IsGranted() || ar.Status.SecretRef == nil {
		return nil, nil
	}
	a, err := r.fromAccessRequest(ctx, ar)
	if apierrors.IsNotFound(err) {
		// The platform already revoked it.
		return nil, nil
	}
	return a, err
}

// accessRequest reads the tenant's AccessRequest; nil when there is none.
func (r *Requester) accessRequest(ctx context.Context, key Key) (*clustersv1alpha1.AccessRequest, error) {
	ar, err := r.lib.AccessRequest(ctx, key.Request, r.opts.Registration.ID(), key.data()...)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return ar, err
}
