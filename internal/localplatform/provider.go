package localplatform

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	cconst "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1/constants"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
)

// The cluster-provider half of the platform, on its own with
// Options.ClusterProviderOnly: the real openmcp-operator schedules ClusterRequests
// (creating the Cluster objects, whose spec.profile comes from its purpose mappings)
// and routes AccessRequests to the provider its ClusterProfile names; this file does
// what a cluster provider such as cluster-provider-kind then does.

// operationAnnotation is openMCP's annotation asking a controller to reconcile an
// object once; the controller responsible for the object removes it.
const operationAnnotation = "openmcp.cloud/operation"

// ClusterProfileName is the ClusterProfile describing a target, or rather the pool it
// belongs to (TargetCluster.Profile; a name that is no target's is taken as a pool's),
// when the platform plays only the cluster provider: the openmcp-operator's purpose
// mappings name it in their Cluster templates, and Cluster objects carrying it are
// backed by a target of the pool.
func (p *Platform) ClusterProfileName(target string) string {
	if t := p.target(target); t != nil {
		target = t.pool()
	}
	return p.opts.Profile + "-" + target
}

// EnsureClusterProfiles creates or updates one ClusterProfile per pool of targets,
// naming Options.ProviderName as provider (which the access-request controller copies
// into the provider label of AccessRequests) and the targets' Kubernetes versions.
func (p *Platform) EnsureClusterProfiles(ctx context.Context) error {
	p.mu.RLock()
	targets := append([]*target(nil), p.targets...)
	p.mu.RUnlock()
	var pools []string
	versions := map[string][]clustersv1alpha1.SupportedK8sVersion{}
	members := map[string][]string{}
	for _, t := range targets {
		dc, err := discovery.NewDiscoveryClientForConfig(t.Config)
		if err != nil {
			return fmt.Errorf("localplatform: discovery client for target %q: %w", t.Name, err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			return fmt.Errorf("localplatform: Kubernetes version of target %q: %w", t.Name, err)
		}
		pool := t.pool()
		if !slices.Contains(pools, pool) {
			pools = append(pools, pool)
		}
		members[pool] = append(members[pool], t.Name)
		sv := clustersv1alpha1.SupportedK8sVersion{Version: strings.TrimPrefix(v.GitVersion, "v")}
		if !slices.Contains(versions[pool], sv) {
			versions[pool] = append(versions[pool], sv)
		}
	}
	for _, pool := range pools {
		prof := &clustersv1alpha1.ClusterProfile{}
		prof.Name = p.ClusterProfileName(pool)
		if _, err := controllerutil.CreateOrUpdate(ctx, p.c, prof, func() error {
			if prof.Labels == nil {
				prof.Labels = map[string]string{}
			}
			prof.Labels[PoolLabel] = pool
			if len(members[pool]) == 1 {
				prof.Labels[TargetLabel] = members[pool][0]
			} else {
				delete(prof.Labels, TargetLabel)
			}
			prof.Spec = clustersv1alpha1.ClusterProfileSpec{
				ProviderRef:       commonapi.LocalObjectReference{Name: p.opts.ProviderName},
				ProviderConfigRef: commonapi.LocalObjectReference{Name: p.opts.ProviderName},
				SupportedVersions: versions[pool],
			}
			return nil
		}); err != nil {
			return fmt.Errorf("localplatform: writing ClusterProfile %s: %w", prof.Name, err)
		}
	}
	return nil
}

// setupClusterProvider adds the cluster provider's controllers: Cluster objects of
// this platform's profiles are made Ready, AccessRequests routed to it are granted.
func (p *Platform) setupClusterProvider(mgr ctrl.Manager, opts controller.Options) error {
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("localplatform-cluster").
		For(&clustersv1alpha1.Cluster{}).
		WithOptions(opts).
		Complete(reconcile.Func(p.reconcileCluster)); err != nil {
		return fmt.Errorf("localplatform: setting up Cluster controller: %w", err)
	}
	routedHere := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetLabels()[clustersv1alpha1.ProviderLabel] == p.opts.ProviderName
	})
	// An AccessRequest to a Cluster of a pool waits until the Cluster is assigned a
	// target: the assignment wakes the AccessRequests referring to the Cluster.
	cache := mgr.GetClient()
	assigned := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetLabels()[TargetLabel] != "" },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectNew.GetLabels()[TargetLabel] != e.ObjectOld.GetLabels()[TargetLabel]
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	requestsFor := func(ctx context.Context, obj client.Object) []reconcile.Request {
		c, ok := obj.(*clustersv1alpha1.Cluster)
		if !ok || len(p.poolOfProfile(c.Spec.Profile)) < 2 {
			return nil
		}
		ars := &clustersv1alpha1.AccessRequestList{}
		if err := cache.List(ctx, ars, client.MatchingLabels{clustersv1alpha1.ProviderLabel: p.opts.ProviderName}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing AccessRequests to wake")
			return nil
		}
		var reqs []reconcile.Request
		for i := range ars.Items {
			ref := ars.Items[i].Spec.ClusterRef
			if ref != nil && ref.Name == c.Name && ref.Namespace == c.Namespace {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ars.Items[i])})
			}
		}
		return reqs
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("localplatform-accessrequest").
		For(&clustersv1alpha1.AccessRequest{}, builder.WithPredicates(routedHere)).
		Watches(&clustersv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(requestsFor), builder.WithPredicates(assigned)).
		WithOptions(opts).
		Complete(reconcile.Func(p.reconcileAccessRequest)); err != nil {
		return fmt.Errorf("localplatform: setting up AccessRequest controller: %w", err)
	}
	return nil
}

// reconcileCluster reports a Cluster object of one of the platform's profiles as Ready,
// with the API server of the target backing it as endpoint, after recording that
// target in its TargetLabel (assignCluster). The Cluster's lifetime is the
// scheduler's: nothing is provisioned, so nothing holds its deletion.
func (p *Platform) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &clustersv1alpha1.Cluster{}
	if found, err := getLive(ctx, p.c, req.NamespacedName, c); !found {
		return reconcile.Result{}, err
	}
	if !c.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	t, err := p.assignCluster(ctx, c)
	if t == nil || err != nil {
		return reconcile.Result{}, err
	}
	if err := p.setClusterReady(ctx, c, t); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// targetOfCluster returns the target behind a Cluster object, or nil: the target
// label the platform writes on Clusters it creates or, for Clusters the real
// scheduler created, on the ones of its profiles (spec.profile) it assigned; a
// profile of a single target needs no label.
func (p *Platform) targetOfCluster(c *clustersv1alpha1.Cluster) *target {
	if !p.opts.ClusterProviderOnly {
		return p.target(c.Labels[TargetLabel])
	}
	pool := p.poolOfProfile(c.Spec.Profile)
	if t := memberOf(pool, c.Labels[TargetLabel]); t != nil {
		return t
	}
	if len(pool) == 1 {
		return pool[0]
	}
	return nil
}

// setClusterReady writes the status a cluster provider reports for a running cluster.
func (p *Platform) setClusterReady(ctx context.Context, c *clustersv1alpha1.Cluster, t *target) error {
	before := c.DeepCopy()
	c.Status.Phase = clustersv1alpha1.CLUSTER_PHASE_READY
	c.Status.ObservedGeneration = c.Generation
	//nolint:staticcheck // still read by clients of older operator versions; Endpoints is set too
	c.Status.APIServer = t.host
	c.Status.Endpoints.Set(clustersv1alpha1.APISERVER_ENDPOINT_EXTERNAL, t.host)
	if equality.Semantic.DeepEqual(before.Status, c.Status) {
		return nil
	}
	if err := p.c.Status().Patch(ctx, c, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating status of Cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// routedTarget is resolveTarget for AccessRequests the openmcp-operator routed here:
// it set spec.clusterRef and the provider and profile labels. The platform only notes
// the target in an annotation, for the cleanup, and takes away a reconcile request
// of the operation annotation, which the responsible controller removes.
func (p *Platform) routedTarget(ctx context.Context, ar *clustersv1alpha1.AccessRequest) (*target, string, string, error) {
	if ar.Spec.ClusterRef == nil {
		return nil, cconst.ReasonConfigurationProblem, "spec.clusterRef is not set: the access-request controller has not routed the request yet", nil
	}
	key := ar.Spec.ClusterRef.NamespacedName()
	c := &clustersv1alpha1.Cluster{}
	if err := p.cache.Get(ctx, key, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cconst.ReasonInvalidReference, fmt.Sprintf("Cluster %s not found", key), nil
		}
		return nil, "", "", fmt.Errorf("getting Cluster %s: %w", key, err)
	}
	t := p.targetOfCluster(c)
	if t == nil {
		if len(p.poolOfProfile(c.Spec.Profile)) > 0 {
			// Assigned in a moment by reconcileCluster, which wakes this request.
			return nil, ReasonClusterNotAssigned, fmt.Sprintf("Cluster %s is not assigned a target of the pool behind its profile %q yet", key, c.Spec.Profile), nil
		}
		return nil, ReasonNoTarget, fmt.Sprintf("Cluster %s has profile %q, which no target of this platform has", key, c.Spec.Profile), nil
	}
	before := ar.DeepCopy()
	if ar.Annotations == nil {
		ar.Annotations = map[string]string{}
	}
	ar.Annotations[TargetAnnotation] = t.Name
	if ar.Annotations[operationAnnotation] == "reconcile" {
		delete(ar.Annotations, operationAnnotation)
	}
	if !equality.Semantic.DeepEqual(before, ar) {
		if err := p.c.Patch(ctx, ar, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return nil, "", "", fmt.Errorf("recording target of AccessRequest %s/%s: %w", ar.Namespace, ar.Name, err)
		}
	}
	return t, "", "", nil
}
