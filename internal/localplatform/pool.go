package localplatform

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
)

// Pools of targets (TargetCluster.Profile): several exclusive API servers serving the
// same purposes behind one ClusterProfile, so that a purpose mapping naming that one
// profile hands each tenant a server of its own. Which target backs a Cluster object
// is recorded in its TargetLabel, once: tokens, RBAC and the endpoint all follow it.

// poolOfProfile returns the targets behind the ClusterProfile called profile, in the
// order they were added; none if the profile is not this platform's.
func (p *Platform) poolOfProfile(profile string) []*target {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var members []*target
	for _, t := range p.targets {
		if p.opts.Profile+"-"+t.pool() == profile {
			members = append(members, t)
		}
	}
	return members
}

// assignCluster returns the target backing a Cluster object the real scheduler
// created (Options.ClusterProviderOnly), choosing and recording it in the Cluster's
// TargetLabel first if no target is recorded yet. It returns nil for a Cluster whose
// profile is not this platform's, that is gone, or whose ClusterRequest names a
// target outside the profile's pool.
func (p *Platform) assignCluster(ctx context.Context, c *clustersv1alpha1.Cluster) (*target, error) {
	pool := p.poolOfProfile(c.Spec.Profile)
	if len(pool) == 0 {
		return nil, nil
	}
	if t := memberOf(pool, c.Labels[TargetLabel]); t != nil {
		return t, nil
	}
	if len(pool) > 1 {
		// Choices are made one at a time, each counting the ones before.
		p.assignMu.Lock()
		defer p.assignMu.Unlock()
	}
	log := ctrl.LoggerFrom(ctx)
	var chosen *target
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// Read directly: the cache may not show a label written a moment ago.
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if chosen = memberOf(pool, c.Labels[TargetLabel]); chosen != nil {
			return nil
		}
		if !c.DeletionTimestamp.IsZero() {
			return nil
		}
		var err error
		if chosen, err = p.chooseTarget(ctx, c, pool); err != nil || chosen == nil {
			return err
		}
		before := c.DeepCopy()
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[TargetLabel] = chosen.Name
		return p.c.Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("assigning Cluster %s/%s to a target: %w", c.Namespace, c.Name, err)
	}
	if chosen != nil && len(pool) > 1 {
		log.Info("Assigned Cluster to a target of its pool", "target", chosen.Name, "pool", chosen.pool())
	}
	return chosen, nil
}

// chooseTarget picks the target of pool for a Cluster without one: the only one, the
// one the TargetAnnotation of a ClusterRequest it serves names, or the least used.
func (p *Platform) chooseTarget(ctx context.Context, c *clustersv1alpha1.Cluster, pool []*target) (*target, error) {
	if len(pool) == 1 {
		return pool[0], nil
	}
	name, err := p.requestedTarget(ctx, c)
	if err != nil {
		return nil, err
	}
	if name != "" {
		if t := memberOf(pool, name); t != nil {
			return t, nil
		}
		// Not retried: only a change of the configuration helps.
		ctrl.LoggerFrom(ctx).Error(nil, "ClusterRequest names a target outside the Cluster's pool; the Cluster stays unassigned",
			"target", name, "pool", pool[0].pool(), "profile", c.Spec.Profile)
		return nil, nil
	}
	return p.leastUsed(ctx, pool)
}

// requestedTarget returns the TargetAnnotation of the ClusterRequest a Cluster
// serves, "" if it has none or there is no such request. The scheduler creates the
// Cluster with the request's finalizer (ClusterRequest.FinalizerForCluster) and only
// then records it in the request's status.cluster: both are looked for.
func (p *Platform) requestedTarget(ctx context.Context, c *clustersv1alpha1.Cluster) (string, error) {
	uids := c.GetRequestUIDs()
	find := func(r client.Reader) (string, bool, error) {
		list := &clustersv1alpha1.ClusterRequestList{}
		if err := r.List(ctx, list); err != nil {
			return "", false, fmt.Errorf("listing ClusterRequests: %w", err)
		}
		found := false
		for i := range list.Items {
			cr := &list.Items[i]
			ref := cr.Status.Cluster
			if !uids.Has(string(cr.UID)) && (ref == nil || ref.Name != c.Name || ref.Namespace != c.Namespace) {
				continue
			}
			found = true
			if name := cr.Annotations[TargetAnnotation]; name != "" {
				return name, true, nil
			}
		}
		return "", found, nil
	}
	name, found, err := find(p.cache)
	if err != nil || found {
		return name, err
	}
	// The cache may not have seen the request yet (or its status.cluster).
	name, _, err = find(p.c)
	return name, err
}

// leastUsed returns the target of pool backing the fewest Cluster objects that are not
// being deleted, the earliest added among equals.
func (p *Platform) leastUsed(ctx context.Context, pool []*target) (*target, error) {
	list := &clustersv1alpha1.ClusterList{}
	if err := p.c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing Clusters: %w", err)
	}
	count := make([]int, len(pool))
	profile := p.ClusterProfileName(pool[0].pool())
	for i := range list.Items {
		c := &list.Items[i]
		ours := c.Labels[clustersv1alpha1.ProviderLabel] == p.opts.ProviderName
		if p.opts.ClusterProviderOnly {
			ours = c.Spec.Profile == profile
		}
		if !ours || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if j := slices.IndexFunc(pool, func(t *target) bool { return t.Name == c.Labels[TargetLabel] }); j >= 0 {
			count[j]++
		}
	}
	best := 0
	for j := range pool {
		if count[j] < count[best] {
			best = j
		}
	}
	return pool[best], nil
}
