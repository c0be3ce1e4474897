package sweep

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	"github.com/openmcp-project/openmcp-operator/lib/clusteraccess/advanced"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Defaults for Options.
const (
	DefaultInterval = 5 * time.Minute
	DefaultAbsences = 3
)

// Options configure a Sweeper.
type Options struct {
	// Client is the platform client (reads may come from a cache).
	Client client.Client
	// ManagedBy is the provider name, the managed-by label of its requests.
	ManagedBy string
	// TenantLabels are the labels naming the tenant on a request (the mode's labels);
	// a request lacking any of them is never swept.
	TenantLabels []string
	// Present reports whether the tenant named by a request's labels still has a Service
	// object. An error counts as present.
	Present func(ctx context.Context, labels map[string]string) (bool, error)
	// Responsible, when set, says whether this process sweeps the tenant named by a
	// request's labels: with several replicas sharing the tenants, each sweeps its own
	// share (internal/sharding), so that one provider Delete runs per gone tenant.
	Responsible func(labels map[string]string) bool
	// Delete, when set, removes what the provider created for a gone tenant, given the
	// tenant's AccessRequests (engine.DeleteOrphan). The tenant's requests are revoked
	// only after it reported done; false or an error keeps them for the next sweep.
	Delete func(ctx context.Context, ars []*clustersv1alpha1.AccessRequest) (done bool, err error)
	// Interval between sweeps. Default 5 minutes.
	Interval time.Duration
	// Absences is how many consecutive sweeps must find a tenant gone before its
	// requests are removed. Default 3; minimum 1.
	Absences int
}

// Sweeper removes requests of tenants that are gone. It is a manager.Runnable that
// needs leader election (only one replica sweeps).
type Sweeper struct {
	opts Options

	mu     sync.Mutex
	absent map[string]int
	// deleted holds the gone tenants whose provider Delete finished, until their
	// requests are gone.
	deleted map[string]bool
}

// New returns a Sweeper.
func New(opts Options) *Sweeper {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Absences < 1 {
		opts.Absences = DefaultAbsences
	}
	return &Sweeper{opts: opts, absent: map[string]int{}, deleted: map[string]bool{}}
}

// Start sweeps every Interval until ctx ends; the first sweep is one Interval after
// start.
func (s *Sweeper) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("sweep")
	ctx = log.IntoContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.Interval):
		}
		res, err := s.Sweep(ctx)
		if err != nil {
			logger.Error(err, "sweeping orphaned platform requests")
		}
		if res.Deleted > 0 || res.Orphans > 0 {
			logger.Info("Swept orphaned platform requests", "orphanedTenants", res.Orphans, "providerDeletes", res.ProviderDeletes,
				"providerDeletesPending", res.ProviderDeletesPending, "deleted", res.Deleted, "finalizersRemoved", res.Released)
		}
	}, 0)
	return nil
}

// Result counts what one sweep did.
type Result struct {
	// Suspects are tenants found gone in this sweep, not yet Absences times.
	Suspects int
	// Orphans are tenants gone for Absences sweeps that were acted on.
	Orphans int
	// ProviderDeletes are orphans whose provider Delete finished in this sweep;
	// ProviderDeletesPending those whose Delete is in progress or failed (their
	// requests stay until a later sweep).
	ProviderDeletes, ProviderDeletesPending int
	// Deleted requests (deletion started), Released requests (finalizer removed).
	Deleted, Released int
}

// Sweep runs once.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	var res Result
	sel := client.MatchingLabels{openmcpconst.ManagedByLabel: s.opts.ManagedBy}
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := s.opts.Client.List(ctx, ars, sel); err != nil {
		return res, fmt.Errorf("listing AccessRequests: %w", err)
	}
	crs := &clustersv1alpha1.ClusterRequestList{}
	if err := s.opts.Client.List(ctx, crs, sel); err != nil {
		return res, fmt.Errorf("listing ClusterRequests: %w", err)
	}

	// Group by tenant: namespace plus the tenant labels' values.
	type tenant struct {
		labels map[string]string
		ars    []*clustersv1alpha1.AccessRequest
		crs    []*clustersv1alpha1.ClusterRequest
	}
	tenants := map[string]*tenant{}
	get := func(ns string, labels map[string]string) *tenant {
		key, ok := s.tenantKey(ns, labels)
		if !ok {
			return nil
		}
		t := tenants[key]
		if t == nil {
			t = &tenant{labels: labels}
			tenants[key] = t
		}
		return t
	}
	for i := range ars.Items {
		if t := get(ars.Items[i].Namespace, ars.Items[i].Labels); t != nil {
			t.ars = append(t.ars, &ars.Items[i])
		}
	}
	for i := range crs.Items {
		if t := get(crs.Items[i].Namespace, crs.Items[i].Labels); t != nil {
			t.crs = append(t.crs, &crs.Items[i])
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	keys := make([]string, 0, len(tenants))
	for k := range tenants {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, key := range keys {
		t := tenants[key]
		if s.opts.Responsible != nil && !s.opts.Responsible(t.labels) {
			continue // another replica's: forgotten below, counted again if it comes back
		}
		seen[key] = true
		present, err := s.opts.Present(ctx, t.labels)
		if err != nil || present {
			if err != nil {
				log.FromContext(ctx).V(1).Info("tenant presence unknown; keeping its requests", "tenant", key, "error", err.Error())
			}
			delete(s.absent, key)
			delete(s.deleted, key)
			continue
		}
		s.absent[key]++
		if s.absent[key] < s.opts.Absences {
			res.Suspects++
			continue
		}
		res.Orphans++
		if s.opts.Delete != nil && !s.deleted[key] && !revoking(t.ars, t.crs) {
			done, err := s.opts.Delete(log.IntoContext(ctx, log.FromContext(ctx).WithValues("tenant", key)), t.ars)
			if err != nil {
				errs = append(errs, fmt.Errorf("provider Delete for tenant %s: %w", key, err))
			}
			if err != nil || !done {
				res.ProviderDeletesPending++
				continue
			}
			res.ProviderDeletes++
			s.deleted[key] = true
			// Delete may take a while: the tenant may have come back meanwhile.
			if present, err := s.opts.Present(ctx, t.labels); err != nil || present {
				delete(s.absent, key)
				delete(s.deleted, key)
				continue
			}
		}
		log.FromContext(ctx).Info("Tenant is gone; removing its platform requests", "tenant", key)
		if len(t.ars) > 0 {
			// ClusterRequests after their AccessRequests are gone: a later sweep.
			errs = append(errs, releaseAll(ctx, s.opts.Client, t.ars, &res)...)
			continue
		}
		errs = append(errs, releaseAll(ctx, s.opts.Client, t.crs, &res)...)
	}
	// Forget tenants without requests left.
	for k := range s.absent {
		if !seen[k] {
			delete(s.absent, k)
		}
	}
	for k := range s.deleted {
		if !seen[k] {
			delete(s.deleted, k)
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("%d request(s) not released, first: %w", len(errs), errs[0])
	}
	return res, nil
}

func (s *Sweeper) tenantKey(ns string, labels map[string]string) (string, bool) {
	parts := []string{ns}
	for _, l := range s.opts.TenantLabels {
		v := labels[l]
		if v == "" {
			return "", false
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, "/"), len(s.opts.TenantLabels) > 0
}

// revoking says whether the revocation of a tenant's requests has started: one of them
// is being deleted. The sweep starts it only after the provider's Delete finished, and
// the engine's deletion path after the provider's Delete too, so a sweep that
// restarted (and forgot) does not call Delete again.
func revoking(ars []*clustersv1alpha1.AccessRequest, crs []*clustersv1alpha1.ClusterRequest) bool {
	for _, ar := range ars {
		if !ar.DeletionTimestamp.IsZero() {
			return true
		}
	}
	for _, cr := range crs {
		if !cr.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// release starts the deletion of o, or removes the clusteraccess library's finalizer
// once it is the only one left (the platform released what it granted).
// releaseAll releases each request of one kind, counting into res.
func releaseAll[T client.Object](ctx context.Context, c client.Client, requests []T, res *Result) []error {
	var errs []error
	for _, o := range requests {
		d, r, err := release(ctx, c, o)
		res.Deleted += d
		res.Released += r
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func release(ctx context.Context, c client.Client, o client.Object) (deleted, released int, err error) {
	what := fmt.Sprintf("%T %s", o, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	if o.GetDeletionTimestamp().IsZero() {
		if err := c.Delete(ctx, o, client.Preconditions{UID: ptrUID(o.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			return 0, 0, fmt.Errorf("deleting %s: %w", what, err)
		}
		log.FromContext(ctx).Info("Deleted orphaned request", "request", what)
		return 1, 0, nil
	}
	if fins := o.GetFinalizers(); len(fins) == 1 && fins[0] == advanced.Finalizer {
		base := o.DeepCopyObject().(client.Object)
		o.SetFinalizers(slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == advanced.Finalizer }))
		if err := c.Patch(ctx, o, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			return 0, 0, fmt.Errorf("removing finalizer of %s: %w", what, err)
		}
		return 0, 1, nil
	}
	return 0, 0, nil
}

func ptrUID(u types.UID) *types.UID { return &u }
