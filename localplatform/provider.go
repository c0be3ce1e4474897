package localplatform

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
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

// ClusterProfileName is the ClusterProfile describing a target when the platform plays
// only the cluster provider: the openmcp-operator's purpose mappings name it in their
// Cluster templates, and Cluster objects carrying it are backed by the target.
func (p *Platform) ClusterProfileName(target string) string {
	return p.opts.Profile + "-" + target
}

// EnsureClusterProfiles creates or updates one ClusterProfile per target, naming
// Options.ProviderName as provider (which the access-request controller copies into
// the provider label of AccessRequests) and the target's Kubernetes version.
func (p *Platform) EnsureClusterProfiles(ctx context.Context) error {
	p.mu.RLock()
	targets := append([]*target(nil), p.targets...)
	p.mu.RUnlock()
	for _, t := range targets {
		dc, err := discovery.NewDiscoveryClientForConfig(t.Config)
		if err != nil {
			return fmt.Errorf("localplatform: discovery client for target %q: %w", t.Name, err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			return fmt.Errorf("localplatform: Kubernetes version of target %q: %w", t.Name, err)
		}
		prof := &clustersv1alpha1.ClusterProfile{}
		prof.Name = p.ClusterProfileName(t.Name)
		if _, err := controllerutil.CreateOrUpdate(ctx, p.c, prof, func() error {
			if prof.Labels == nil {
				prof.Labels = map[string]string{}
			}
			prof.Labels[TargetLabel] = t.Name
			prof.Spec = clustersv1alpha1.ClusterProfileSpec{
				ProviderRef:       commonapi.LocalObjectReference{Name: p.opts.ProviderName},
				ProviderConfigRef: commonapi.LocalObjectReference{Name: p.opts.ProviderName},
				SupportedVersions: []clustersv1alpha1.SupportedK8sVersion{{Version: strings.TrimPrefix(v.GitVersion, "v")}},
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
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("localplatform-accessrequest").
		For(&clustersv1alpha1.AccessRequest{}, builder.WithPredicates(routedHere)).
		WithOptions(opts).
		Complete(reconcile.Func(p.reconcileAccessRequest)); err != nil {
		return fmt.Errorf("localplatform: setting up AccessRequest controller: %w", err)
	}
	return nil
}

// reconcileCluster reports a Cluster object backed by one of the targets as Ready,
// with the target's API server as endpoint. The Cluster's lifetime is the scheduler's:
// nothing is provisioned, so nothing holds its deletion.
func (p *Platform) reconcileCluster(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c := &clustersv1alpha1.Cluster{}
	if err := p.c.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting Cluster %s: %w", req, err)
	}
	t := p.targetOfCluster(c)
	if t == nil || !c.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if err := p.setClusterReady(ctx, c, t); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// targetOfCluster returns the target behind a Cluster object, or nil: the target
// label the platform writes on Clusters it creates, or, for Clusters the real
// scheduler created, the ClusterProfile in spec.profile.
func (p *Platform) targetOfCluster(c *clustersv1alpha1.Cluster) *target {
	if !p.opts.ClusterProviderOnly {
		return p.target(c.Labels[TargetLabel])
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, t := range p.targets {
		if c.Spec.Profile == p.ClusterProfileName(t.Name) {
			return t
		}
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
