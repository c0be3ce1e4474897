package handover

import (
	"context"
	"fmt"
	"sync"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Options configure a Gate and its Cleanup.
type Options struct {
	// Client is the platform cluster's, uncached: it reads one Deployment and deletes
	// a few requests, once.
	Client client.Client
	// Namespace is the provider's namespace, where the old onboarding requests and
	// the provider's Deployment are.
	Namespace string
	// Deployment is the provider's Deployment, whose rollout must be complete: the
	// openmcp-operator names it sp-<provider>. Absent (the runtime runs outside the
	// operator), only leadership is waited for.
	Deployment string
	// Requests are the names of the old onboarding ClusterRequests and AccessRequests.
	Requests []string
	// Interval between looks at the rollout; default 10 s.
	Interval time.Duration
}

// Cleanup is a leader-elected runnable of standard mode's manager: it runs only while
// this replica leads (so no old pod does, when the migration elects on the old lease),
// waits for the gate to open and returns once the old requests are gone.
type Cleanup struct {
	gate *Gate
	opts Options
}

// New returns the Cleanup of gate's migration; nil when there is nothing to remove.
func New(gate *Gate) *Cleanup {
	if len(gate.opts.Requests) == 0 {
		return nil
	}
	return &Cleanup{gate: gate, opts: gate.opts}
}

// NeedLeaderElection is true: only the leader removes anything.
func (*Cleanup) NeedLeaderElection() bool { return true }

// Start waits for the rollout, then deletes the requests; it ends when they are gone
// or ctx ends. A failure is logged and tried again: it never stops the manager.
func (c *Cleanup) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("handover")
	_ = wait.PollUntilContextCancel(ctx, c.opts.Interval, true, func(ctx context.Context) (bool, error) {
		if held, why := c.gate.Held(ctx); held {
			logger.V(1).Info("keeping the old onboarding requests while old pods may run", "why", why)
			return false, nil
		}
		left, err := c.Remove(ctx)
		if err != nil {
			logger.Info("removing the old onboarding requests failed; trying again", "error", err.Error())
			return false, nil
		}
		if left > 0 {
			return false, nil
		}
		logger.Info("the old binary's onboarding requests are gone", "requests", c.opts.Requests, "namespace", c.opts.Namespace)
		return true, nil
	})
	return nil
}

// rolledOut says whether the provider's Deployment runs only pods of its current
// template, so that no pod of the old binary runs or can start again; why says what
// is still rolling.
func (g *Gate) rolledOut(ctx context.Context) (done bool, why string, err error) {
	if g.opts.Deployment == "" {
		return true, "", nil
	}
	d := &appsv1.Deployment{}
	if err := g.opts.Client.Get(ctx, client.ObjectKey{Namespace: g.opts.Namespace, Name: g.opts.Deployment}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "", fmt.Errorf("reading Deployment %s/%s: %w", g.opts.Namespace, g.opts.Deployment, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("Deployment %s/%s: generation %d not observed yet", d.Namespace, d.Name, d.Generation), nil
	case s.UpdatedReplicas != want || s.Replicas != want:
		return false, fmt.Sprintf("Deployment %s/%s: %d of %d pods are of the current template, %d run", d.Namespace, d.Name, s.UpdatedReplicas, want, s.Replicas), nil
	}
	return true, "", nil
}

// Remove deletes the old requests, AccessRequests first (the platform revokes their
// credentials), then ClusterRequests once their AccessRequests are gone; left counts
// what still exists.
func (c *Cleanup) Remove(ctx context.Context) (left int, err error) {
	for _, kind := range []func() client.Object{
		func() client.Object { return &clustersv1alpha1.AccessRequest{} },
		func() client.Object { return &clustersv1alpha1.ClusterRequest{} },
	} {
		for _, name := range c.opts.Requests {
			obj := kind()
			if err := c.opts.Client.Get(ctx, client.ObjectKey{Namespace: c.opts.Namespace, Name: name}, obj); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return 0, fmt.Errorf("reading %T %s/%s: %w", obj, c.opts.Namespace, name, err)
			}
			left++
			if obj.GetDeletionTimestamp().IsZero() {
				uid := obj.GetUID()
				if err := c.opts.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
					return 0, fmt.Errorf("deleting %T %s/%s: %w", obj, c.opts.Namespace, name, err)
				}
			}
		}
		if left > 0 {
			return left, nil // ClusterRequests after their AccessRequests are gone
		}
	}
	return 0, nil
}

// Gate holds standard mode's reconciles while pods of the old binary may run, so that
// one binary writes at every moment of the rollout: the new pod becomes ready (its
// caches sync without reconciling), the Deployment stops the old pod, and only then
// does the new one write. Once open it stays open.
type Gate struct {
	opts Options

	mu   sync.Mutex
	open bool
	last time.Time
	why  string
}

// gateRecheck bounds how often a held gate reads the Deployment, whatever the number
// of objects waiting behind it.
const gateRecheck = 2 * time.Second

// NewGate returns the gate of a migration.
func NewGate(opts Options) *Gate {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	return &Gate{opts: opts}
}

// Held says whether reconciles must wait, and why.
func (g *Gate) Held(ctx context.Context) (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return false, ""
	}
	if time.Since(g.last) < gateRecheck {
		return true, g.why
	}
	g.last = time.Now()
	done, why, err := g.rolledOut(ctx)
	switch {
	case err != nil:
		g.why = err.Error()
	case done:
		g.open = true
		log.FromContext(ctx).Info("no pod of the old binary runs any more: serving its tenants")
		return false, ""
	default:
		g.why = why
	}
	return true, g.why
}

// Retry is how soon a held object is looked at again.
func (g *Gate) Retry() time.Duration { return g.opts.Interval }
