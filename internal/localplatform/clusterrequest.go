package localplatform

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	cconst "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1/constants"
	commonapi "github.com/openmcp-project/openmcp-operator/api/common"
)

// reconcileClusterRequest plays the openmcp-operator's scheduler for one ClusterRequest.
func (p *Platform) reconcileClusterRequest(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cr := &clustersv1alpha1.ClusterRequest{}
	if found, err := getLive(ctx, p.c, req.NamespacedName, cr); !found {
		return reconcile.Result{}, err
	}
	if !cr.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, p.releaseClusterRequest(ctx, cr)
	}
	return p.ensureClusterRequest(ctx, cr, true)
}

// ensureClusterRequest grants cr unless the policy (asked only if usePolicy) says
// otherwise. cr is updated in place.
func (p *Platform) ensureClusterRequest(ctx context.Context, cr *clustersv1alpha1.ClusterRequest, usePolicy bool) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if err := addFinalizer(ctx, p.c, cr, clustersv1alpha1.ClusterRequestFinalizer); err != nil {
		return reconcile.Result{}, fmt.Errorf("adding finalizer to ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	if cr.Status.Cluster != nil {
		// Like the real scheduler, a granted request keeps its cluster for good.
		return reconcile.Result{}, nil
	}

	if usePolicy && p.opts.ClusterRequestPolicy != nil {
		d := p.opts.ClusterRequestPolicy(ctx, cr)
		if d.Deny {
			log.Info("Denying ClusterRequest by policy", "reason", d.Reason)
			return reconcile.Result{}, p.setClusterRequestStatus(ctx, cr, clustersv1alpha1.REQUEST_DENIED, metav1.ConditionFalse, orDefault(d.Reason, ReasonDenied), d.Message)
		}
		if wait := time.Until(d.DelayUntil); wait > 0 {
			msg := orDefault(d.Message, "delayed until "+d.DelayUntil.UTC().Format(time.RFC3339))
			return reconcile.Result{RequeueAfter: wait}, p.setClusterRequestStatus(ctx, cr, clustersv1alpha1.REQUEST_PENDING, metav1.ConditionFalse, orDefault(d.Reason, ReasonDelayed), msg)
		}
	}

	t, why := p.pickTarget(cr)
	if t == nil {
		// The real scheduler also leaves requests for unknown purposes pending; a target
		// added later picks them up.
		return reconcile.Result{RequeueAfter: p.opts.RetryInterval}, p.setClusterRequestStatus(ctx, cr, clustersv1alpha1.REQUEST_PENDING, metav1.ConditionFalse, ReasonNoTarget, why)
	}
	c, t, err := p.ensureCluster(ctx, cr, t)
	if err != nil {
		if serr := p.setClusterRequestStatus(ctx, cr, clustersv1alpha1.REQUEST_PENDING, metav1.ConditionFalse, cconst.ReasonPlatformClusterInteractionProblem, err.Error()); serr != nil {
			log.Error(serr, "Updating status of ClusterRequest")
		}
		return reconcile.Result{}, err
	}

	before := cr.DeepCopy()
	cr.Status.Cluster = &commonapi.ObjectReference{Name: c.Name, Namespace: c.Namespace}
	setGrantedCondition(&cr.Status.Conditions, cr.Generation, metav1.ConditionTrue, ReasonGranted,
		fmt.Sprintf("Cluster %s/%s (target %s)", c.Namespace, c.Name, t.Name))
	cr.Status.Phase = clustersv1alpha1.REQUEST_GRANTED
	cr.Status.ObservedGeneration = cr.Generation
	if err := p.c.Status().Patch(ctx, cr, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, fmt.Errorf("granting ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	log.Info("Granted ClusterRequest", "cluster", c.Namespace+"/"+c.Name, "target", t.Name)
	return reconcile.Result{}, nil
}

// pickTarget returns the target serving cr, or nil and why there is none. A target
// of a pool of several stands for the pool unless cr names it: ensureCluster picks
// the pool's least used.
func (p *Platform) pickTarget(cr *clustersv1alpha1.ClusterRequest) (*target, string) {
	purpose := cr.Spec.Purpose
	if name, ok := cr.Annotations[TargetAnnotation]; ok {
		t := p.target(name)
		if t == nil {
			return nil, fmt.Sprintf("target %q named by annotation %s is not configured", name, TargetAnnotation)
		}
		if !slices.Contains(t.Purposes, purpose) {
			return nil, fmt.Sprintf("target %q does not serve purpose %q", name, purpose)
		}
		return t, ""
	}
	if t := p.targetFor(purpose); t != nil {
		return t, ""
	}
	return nil, fmt.Sprintf("no target cluster serves purpose %q", purpose)
}

// ensureCluster ensures the Cluster object describing t for cr, marked with cr's
// finalizer as the real scheduler does, and its status. It returns the Cluster and
// its target, which for a pool of several targets (and cr naming none) is the one the
// Cluster has, or else the least used.
func (p *Platform) ensureCluster(ctx context.Context, cr *clustersv1alpha1.ClusterRequest, t *target) (*clustersv1alpha1.Cluster, *target, error) {
	c := &clustersv1alpha1.Cluster{}
	purposes := t.Purposes
	shared := t.Tenancy == clustersv1alpha1.TENANCY_SHARED
	if shared {
		c.Name, c.Namespace = t.Name, p.opts.Namespace
		p.sharedMu.Lock()
		defer p.sharedMu.Unlock()
	} else {
		c.Name, c.Namespace = cr.Name, cr.Namespace
		purposes = []string{cr.Spec.Purpose}
	}
	fin := cr.FinalizerForCluster()

	err := p.c.Get(ctx, client.ObjectKeyFromObject(c), c)
	if _, named := cr.Annotations[TargetAnnotation]; !shared && !named {
		if pool := p.pool(t.pool()); len(pool) > 1 {
			// Choices are made one at a time, each counting the ones before.
			p.assignMu.Lock()
			defer p.assignMu.Unlock()
			if err == nil {
				if existing := memberOf(pool, c.Labels[TargetLabel]); existing != nil {
					t = existing
				}
			} else if apierrors.IsNotFound(err) {
				chosen, lerr := p.leastUsed(ctx, pool)
				if lerr != nil {
					return nil, nil, fmt.Errorf("choosing a target of pool %q: %w", t.pool(), lerr)
				}
				t = chosen
			}
		}
	}
	if apierrors.IsNotFound(err) {
		if shared {
			// Only the first request of a shared target creates its namespace.
			if err := ensureNamespace(ctx, p.c, c.Namespace); err != nil {
				return nil, nil, fmt.Errorf("on the platform cluster: %w", err)
			}
		}
		c.Labels = map[string]string{
			clustersv1alpha1.ProviderLabel: p.opts.ProviderName,
			TargetLabel:                    t.Name,
		}
		if t.Tenancy == clustersv1alpha1.TENANCY_EXCLUSIVE {
			// Created for this request alone: gone with it.
			c.Labels[clustersv1alpha1.DeleteWithoutRequestsLabel] = "true"
		}
		c.Annotations = map[string]string{clustersv1alpha1.ProviderInfoAnnotation: "local API server " + t.host}
		c.Finalizers = []string{fin}
		c.Spec = clustersv1alpha1.ClusterSpec{
			Profile:  p.opts.Profile,
			Purposes: slices.Clone(purposes),
			Tenancy:  t.Tenancy,
		}
		err = p.c.Create(ctx, c)
		if apierrors.IsAlreadyExists(err) {
			// Someone else (RegisterControlPlane or a concurrent reconcile) was faster.
			err = p.c.Get(ctx, client.ObjectKeyFromObject(c), c)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ensuring Cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	if got := c.Labels[TargetLabel]; got != t.Name {
		return nil, nil, fmt.Errorf("cluster %s/%s exists but describes target %q, not %q", c.Namespace, c.Name, got, t.Name)
	}
	if err := sharedFinalizer(ctx, p.c, c, fin, addFinalizer); err != nil {
		return nil, nil, fmt.Errorf("adding finalizer to Cluster %s/%s: %w", c.Namespace, c.Name, err)
	}

	if err := p.setClusterReady(ctx, c, t); err != nil {
		return nil, nil, err
	}
	return c, t, nil
}

// releaseClusterRequest is the deletion half of the scheduler: it removes cr's
// finalizer from its Cluster objects, deletes those made for cr alone, and then its
// own finalizer from cr. The requester's finalizer stays for the requester to remove.
func (p *Platform) releaseClusterRequest(ctx context.Context, cr *clustersv1alpha1.ClusterRequest) error {
	if !controllerutil.ContainsFinalizer(cr, clustersv1alpha1.ClusterRequestFinalizer) {
		return nil
	}
	fin := cr.FinalizerForCluster()
	p.sharedMu.Lock()
	defer p.sharedMu.Unlock()
	list := &clustersv1alpha1.ClusterList{}
	if err := p.c.List(ctx, list, client.MatchingLabels{clustersv1alpha1.ProviderLabel: p.opts.ProviderName}); err != nil {
		return fmt.Errorf("listing Clusters: %w", err)
	}
	for i := range list.Items {
		c := &list.Items[i]
		if !controllerutil.ContainsFinalizer(c, fin) {
			continue
		}
		if err := sharedFinalizer(ctx, p.c, c, fin, removeFinalizer); err != nil {
			return fmt.Errorf("removing finalizer of ClusterRequest %s/%s from Cluster %s/%s: %w", cr.Namespace, cr.Name, c.Namespace, c.Name, err)
		}
		if c.GetTenancyCount() == 0 && c.Labels[clustersv1alpha1.DeleteWithoutRequestsLabel] == "true" {
			if err := p.c.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting Cluster %s/%s: %w", c.Namespace, c.Name, err)
			}
		}
	}
	if err := removeFinalizer(ctx, p.c, cr, clustersv1alpha1.ClusterRequestFinalizer); err != nil {
		return fmt.Errorf("removing finalizer from ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Released ClusterRequest")
	return nil
}

// setClusterRequestStatus records a phase that is not Granted.
func (p *Platform) setClusterRequestStatus(ctx context.Context, cr *clustersv1alpha1.ClusterRequest, phase string, status metav1.ConditionStatus, reason, message string) error {
	before := cr.DeepCopy()
	cr.Status.Phase = phase
	cr.Status.ObservedGeneration = cr.Generation
	setGrantedCondition(&cr.Status.Conditions, cr.Generation, status, reason, message)
	if equality.Semantic.DeepEqual(before.Status, cr.Status) {
		return nil
	}
	if err := p.c.Status().Patch(ctx, cr, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("updating status of ClusterRequest %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	return nil
}

// setGrantedCondition sets the Granted condition; its transition time only moves when
// its status does.
func setGrantedCondition(conds *[]metav1.Condition, generation int64, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               ConditionGranted,
		Status:             status,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            message,
	})
}

// addFinalizer adds fin to obj on the server, failing on a concurrent change rather
// than overwriting finalizers someone else just set.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object, fin string) error {
	if controllerutil.ContainsFinalizer(obj, fin) {
		return nil
	}
	before := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, fin)
	return c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// sharedFinalizer adds or removes (change) fin on an object many requests share, such
// as the Cluster of a shared target: on a conflict it reads the object again and
// retries at once. Returning the conflict instead would put the request into the
// controller's exponential backoff, and with many tenants coming and going the backoff
// of an unlucky request reached minutes.
func sharedFinalizer(ctx context.Context, c client.Client, obj client.Object, fin string, change func(context.Context, client.Client, client.Object, string) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := change(ctx, c, obj, fin)
		if apierrors.IsConflict(err) {
			// Read what won, for the next try.
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
				return gerr
			}
		}
		return err
	})
}

// removeFinalizer is the inverse of addFinalizer.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, fin string) error {
	if !controllerutil.ContainsFinalizer(obj, fin) {
		return nil
	}
	before := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, fin)
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
