package access

import (
	"context"
	"fmt"
	"maps"
	"time"

	ctrlutils "github.com/openmcp-project/controller-utils/pkg/controller"
	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// routeAccessRequest creates the tenant's AccessRequest, once the ClusterRequest it
// depends on is granted, already routed: spec.clusterRef names the granted Cluster and
// the provider and profile labels name its ClusterProfile and cluster provider, as the
// openmcp-operator's access-request controller would have written them. That
// controller then has nothing to resolve and only marks the request Pending, and the
// cluster provider grants it at once.
//
// The reason is the operator's pace (docs/design/real-operator.md): its clients keep
// client-go's default limit of 5 requests per second, and resolving a request that
// names only its ClusterRequest costs it several requests more than a routed one
// (docs/design/measured.md). It also means the access-request controller never
// sees a request whose ClusterRequest is not granted yet, which it answers with an
// error and its exponential backoff.
//
// Once it has created the request, it returns a *WaitingError: the library runs on the
// next pass, when the informer cache shows the request (routedGrace), so that it never
// orders a second, unrouted one. Everything else about the request is the clusteraccess
// library's, which finds it existing and leaves it be: the same name, namespace,
// managed labels, finalizer and token configuration. Where the granted Cluster or its
// profile is not in the cache yet, the tenant waits for it (awaitRoute), for at most
// routedGrace; after that, or where the profile names no cluster provider, nothing is
// created here and the library orders the request as it always does. For a
// registration on a ClusterRequest the runtime does not own (a ControlPlane's), the
// tenant waits for that grant here, before the library creates a request that could
// only be answered with backoff.
//
// reg is the registration for the tenant and namespace its platform namespace, as
// Ensure derived them.
func (r *Requester) routeAccessRequest(ctx context.Context, key Key, reg advanced.ParameterizedClusterRegistration, namespace string) error {
	if !reg.AccessRequestAvailable() {
		return nil
	}
	arKey := client.ObjectKey{Namespace: namespace, Name: r.requestName(key, reg)}
	if err := r.platform.Get(ctx, arKey, &clustersv1alpha1.AccessRequest{}); !apierrors.IsNotFound(err) {
		if err == nil {
			r.mu.Lock()
			delete(r.routed, arKey)
			delete(r.unrouted, arKey)
			r.mu.Unlock()
		}
		return err // exists (nil), or could not be read
	}
	// Created here a moment ago, and not in the cache yet: neither this code nor the
	// library (which would create it again, unrouted) may act on the cache's word.
	// The grant's watch event wakes the tenant.
	r.mu.Lock()
	at, created := r.routed[arKey]
	r.mu.Unlock()
	if created && time.Since(at) < routedGrace {
		return &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.waitingRetry(key), Message: r.waitingMessage(key)}
	}

	spec, err := reg.ClusterRequestSpec()
	if err != nil {
		return fmt.Errorf("ClusterRequest spec of %s access: %w", reg.ID(), err)
	}
	owned := spec != nil
	crKey := client.ObjectKey{Namespace: namespace, Name: arKey.Name}
	if !owned {
		ref, err := reg.ClusterRequestReference()
		if err != nil {
			return fmt.Errorf("ClusterRequest of %s access: %w", reg.ID(), err)
		}
		if ref == nil {
			return nil // a registration on a Cluster: the library names it directly
		}
		crKey = client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	}
	cr := &clustersv1alpha1.ClusterRequest{}
	if err := r.platform.Get(ctx, crKey, cr); err != nil {
		if apierrors.IsNotFound(err) && owned {
			return nil // the library orders it first
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading ClusterRequest %s: %w", crKey, err)
		}
	}
	if !cr.Status.IsGranted() || cr.Status.Cluster == nil {
		if owned {
			return nil // the library waits for the grant itself
		}
		return &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.waitingRetry(key),
			Message: fmt.Sprintf("waiting for the platform to grant ClusterRequest %s, which the %s access is ordered on", crKey, reg.ID())}
	}

	c := &clustersv1alpha1.Cluster{}
	if err := r.platform.Get(ctx, cr.Status.Cluster.NamespacedName(), c); apierrors.IsNotFound(err) {
		return r.awaitRoute(key, arKey)
	} else if err != nil {
		return err
	}
	profile := &clustersv1alpha1.ClusterProfile{}
	if err := r.platform.Get(ctx, client.ObjectKey{Name: c.Spec.Profile}, profile); apierrors.IsNotFound(err) {
		return r.awaitRoute(key, arKey)
	} else if err != nil {
		return err
	}
	if profile.Spec.ProviderRef.Name == "" {
		return nil // no cluster provider to route to: the library orders it unrouted
	}
	r.mu.Lock()
	delete(r.unrouted, arKey)
	r.mu.Unlock()
	token, err := reg.AccessRequestTokenConfig()
	if err != nil {
		return fmt.Errorf("token configuration of %s access: %w", reg.ID(), err)
	}
	oidc, err := reg.AccessRequestOIDCConfig()
	if err != nil {
		return fmt.Errorf("OIDC configuration of %s access: %w", reg.ID(), err)
	}
	ar := &clustersv1alpha1.AccessRequest{}
	ar.Namespace, ar.Name = arKey.Namespace, arKey.Name
	ar.Labels = r.managedLabels(key, reg)
	ar.Labels[clustersv1alpha1.ProviderLabel] = profile.Spec.ProviderRef.Name
	ar.Labels[clustersv1alpha1.ProfileLabel] = profile.Name
	ar.Annotations = r.recordsOf(key)
	controllerutil.AddFinalizer(ar, advanced.Finalizer)
	ar.Spec.ClusterRef = &commonapi.ObjectReference{Namespace: c.Namespace, Name: c.Name}
	ar.Spec.Token, ar.Spec.OIDC = token, oidc
	if err := r.platform.Create(ctx, ar); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating AccessRequest %s: %w", arKey, err)
	}
	r.mu.Lock()
	r.routed[arKey] = time.Now()
	r.mu.Unlock()
	return &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: r.waitingRetry(key), Message: r.waitingMessage(key)}
}

// requestName is the name the library gives the tenant's requests of reg: the
// controller name, the tenant's request and the registration's suffix (its ID when it
// has none).
func (r *Requester) requestName(key Key, reg advanced.ParameterizedClusterRegistration) string {
	suffix := reg.Suffix()
	if suffix == "" {
		suffix = reg.ID()
	}
	return advanced.StableRequestName(r.opts.ControllerName, key.Request, suffix)
}

// awaitRoute is the answer when the ClusterRequest is granted but the informer cache
// does not show its Cluster (or the Cluster's profile) yet: the grant says they exist,
// and the cache is a watch event behind (the Cluster and the grant reach it through
// different informers; an e2e run under load saw the grant first). The tenant looks
// again in a second rather than let the library order an unrouted request, which the
// operator's access-request controller must then resolve at its own pace. If the
// route stays unreadable for routedGrace, the library orders the request as it always
// does.
func (r *Requester) awaitRoute(key Key, arKey client.ObjectKey) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	since, waited := r.unrouted[arKey]
	if !waited {
		since = time.Now()
		r.unrouted[arKey] = since
	}
	if time.Since(since) >= routedGrace {
		delete(r.unrouted, arKey)
		return nil
	}
	return &WaitingError{Reason: r.opts.WaitingReason, RequeueAfter: time.Second, Message: r.waitingMessage(key)}
}

// routedGrace is how long an AccessRequest this Requester created is taken to exist
// while the informer cache does not show it yet: a tenant woken again before its cache
// caught up would create the request a second time (refused as AlreadyExists, but a
// request each; docs/design/measured.md).
const routedGrace = 30 * time.Second

// managedLabels are the labels the clusteraccess library expects on the tenant's
// requests: its managed-by and purpose labels and the Requester's own, shortened as the
// library shortens them.
func (r *Requester) managedLabels(key Key, reg advanced.ParameterizedClusterRegistration) map[string]string {
	by, purpose, _ := advanced.DefaultManagedLabelGenerator(r.opts.ControllerName, key.Request, reg)
	labels := map[string]string{}
	if r.opts.Labels != nil {
		maps.Copy(labels, r.opts.Labels(key.Request))
	}
	for k, v := range labels {
		labels[k] = ctrlutils.ShortenToXCharactersUnsafe(v, ctrlutils.K8sMaxNameLength)
	}
	labels[openmcpconst.ManagedByLabel] = ctrlutils.ShortenToXCharactersUnsafe(by, ctrlutils.K8sMaxNameLength)
	labels[openmcpconst.ManagedPurposeLabel] = ctrlutils.ShortenToXCharactersUnsafe(purpose, ctrlutils.K8sMaxNameLength)
	return labels
}

// ensureNamespace makes sure the tenant's platform namespace exists before anything
// is ordered in it, by creating it, not by reading it first: a tenant's first pass
// then costs the one create the library would have issued after its read, and the
// library's own read (namespaceMemory) is answered from memory. A namespace this
// process already knows costs nothing; AlreadyExists counts as existing.
//
// Nor does a namespace that holds one of the tenant's requests in the informer cache:
// a request stands only in a namespace that exists. That is every tenant a process
// starts serving with its requests already ordered, after a restart or when a
// replica takes over a dead one's workspaces, where a create refused as
// AlreadyExists cost each tenant's first reconcile a platform round trip.
func (r *Requester) ensureNamespace(ctx context.Context, key Key, reg advanced.ParameterizedClusterRegistration, name string) error {
	if r.namespaces.knows(name) {
		return nil
	}
	if r.requestCached(ctx, client.ObjectKey{Namespace: name, Name: r.requestName(key, reg)}) {
		r.namespaces.remember(name)
		return nil
	}
	ns := &corev1.Namespace{}
	ns.Name = name
	if err := r.namespaces.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating platform namespace %s: %w", name, err)
	}
	return nil
}

// requestCached says whether the platform client's cache holds the tenant's
// AccessRequest or ClusterRequest of that key (both share the name).
func (r *Requester) requestCached(ctx context.Context, key client.ObjectKey) bool {
	if err := r.platform.Get(ctx, key, &clustersv1alpha1.AccessRequest{}); err == nil {
		return true
	}
	return r.platform.Get(ctx, key, &clustersv1alpha1.ClusterRequest{}) == nil
}
