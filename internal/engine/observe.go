package engine

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	openmcpconst "github.com/openmcp-project/openmcp-operator/api/constants"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/metrics"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// Event reasons the engine emits besides the Ready reasons (which it emits as they
// are when the Ready condition changes reason).
const (
	// EventAccepted: the runtime admitted the object and took responsibility for it
	// (it added its finalizer).
	EventAccepted = "Accepted"
	// EventLeftBehind: deletion finished but left objects to the tenant that the
	// runtime could no longer remove (Warning).
	EventLeftBehind = "LeftBehind"
)

// warningReasons are the Ready reasons whose events are of type Warning: something
// the tenant or an operator has to act on, or a failure being retried.
var warningReasons = map[string]bool{
	v1alpha1.ReasonAccessDenied:           true,
	v1alpha1.ReasonWorkloadDenied:         true,
	v1alpha1.ReasonProviderError:          true,
	v1alpha1.ReasonRuntimeError:           true,
	v1alpha1.ReasonNotSingleton:           true,
	v1alpha1.ReasonPermissionClaimMissing: true,
	v1alpha1.ReasonControlPlaneNotFound:   true,
	v1alpha1.ReasonProviderConfigMissing:  true,
	v1alpha1.ReasonProviderConfigInvalid:  true,
	v1alpha1.ReasonAccessRepaired:         true,
	v1alpha1.ReasonConflictingObject:      true,
	v1alpha1.ReasonCleanupBlocked:         true,
}

// maxEventNote is events.k8s.io's limit on an event's note.
const maxEventNote = 1024

// observation follows one reconcile for metrics and events. What it reports is
// derived from the object before and after the reconcile, so the reconcile code only
// tells it what it saw; it never decides anything.
type observation[T provider.Object] struct {
	start time.Time

	// Set once the object was read.
	target       *Target[T]
	before       v1alpha1.ServiceStatus
	hadFinalizer bool

	// Set once the ProviderConfig was loaded.
	pc    provider.ProviderConfig
	pcErr error
	pcSet bool
}

func (e *Engine[T]) begin() *observation[T] {
	return &observation[T]{start: time.Now()}
}

// saw records the object as it was read, before the reconcile changes it.
func (o *observation[T]) saw(t Target[T], finalizer string) {
	o.target = &t
	o.before = *t.Object.GetServiceStatus().DeepCopy()
	o.hadFinalizer = controllerutil.ContainsFinalizer(t.Object, finalizer)
}

// loaded records the ProviderConfig the reconcile used.
func (o *observation[T]) loaded(pc provider.ProviderConfig, err error) {
	o.pc, o.pcErr, o.pcSet = pc, err, true
}

// end reports the reconcile: metrics always, events on transitions.
func (e *Engine[T]) end(ctx context.Context, o *observation[T], err error) {
	mode := string(e.opts.Tenancy.Mode())
	p := e.opts.Provider
	metrics.ReconcileDuration.WithLabelValues(p, mode).Observe(time.Since(o.start).Seconds())
	if o.pcSet {
		if o.pcErr == nil && o.pc != nil {
			metrics.ProviderConfigGeneration.WithLabelValues(p, mode).Set(float64(o.pc.GetGeneration()))
			metrics.ProviderConfigValid.WithLabelValues(p, mode).Set(1)
		} else {
			metrics.ProviderConfigValid.WithLabelValues(p, mode).Set(0)
		}
	}
	if o.target == nil {
		result := metrics.ResultSkipped
		if err != nil {
			result = metrics.ResultError
		}
		metrics.ReconcilesTotal.WithLabelValues(p, mode, result).Inc()
		return
	}
	obj := o.target.Object
	if obj.GetAnnotations()[openmcpconst.OperationAnnotation] == openmcpconst.OperationAnnotationValueIgnore {
		metrics.ReconcilesTotal.WithLabelValues(p, mode, metrics.ResultIgnored).Inc()
		return
	}
	after := obj.GetServiceStatus()
	released := !obj.GetDeletionTimestamp().IsZero() && o.hadFinalizer && !controllerutil.ContainsFinalizer(obj, e.opts.Finalizer)
	metrics.ReconcilesTotal.WithLabelValues(p, mode, resultOf(err, released, after)).Inc()

	// A failed status write leaves the old status on the server: the next reconcile
	// sees the same transition again and reports it then, once.
	if errors.Is(err, errWritingStatus) || released {
		return
	}
	beforeCond := meta.FindStatusCondition(o.before.Conditions, v1alpha1.ConditionReady)
	afterCond := meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionReady)
	beforeReason, afterReason := reasonOf(beforeCond), reasonOf(afterCond)

	uid := obj.GetUID()
	if !o.hadFinalizer && controllerutil.ContainsFinalizer(obj, e.opts.Finalizer) && obj.GetDeletionTimestamp().IsZero() &&
		e.reported.first(uid, EventAccepted) {
		e.emit(ctx, o.target, corev1.EventTypeNormal, EventAccepted, "Accept",
			"accepted by the "+p+" service provider in "+mode+" mode for tenant "+o.target.Identity.String())
	}
	if released {
		defer e.reported.forget(uid)
	}
	// The stored reason is in its written form (Options.WrittenReason): a transition
	// is a change of what the tenant reads.
	if afterReason == "" || e.writtenReason(afterReason) == e.writtenReason(beforeReason) || !e.reported.first(uid, afterReason) {
		return
	}
	if afterReason == v1alpha1.ReasonNotSingleton {
		metrics.SingletonConflictsTotal.WithLabelValues(p, mode).Inc()
	}
	if beforeCond != nil {
		e.observeGrant(p, mode, beforeReason, afterReason, beforeCond.LastTransitionTime)
	}
	eventType := corev1.EventTypeNormal
	if warningReasons[afterReason] {
		eventType = corev1.EventTypeWarning
	}
	action := "Reconcile"
	if !obj.GetDeletionTimestamp().IsZero() {
		action = "Delete"
	}
	e.emit(ctx, o.target, eventType, afterReason, action, afterCond.Message)
}

// reported remembers, per object, the last transition the engine reported, for a few
// minutes. A reconcile may read an object from a cache that has not yet seen the
// previous reconcile's status write (a grant's watch event often arrives first); it
// then sees the same transition again, and without this memory would report it twice.
type reported struct{ *memory[reportedTransition] }

type reportedTransition struct {
	reason   string // the last Ready reason reported
	accepted bool   // Accepted was reported
}

func newReported() *reported { return &reported{newMemory[reportedTransition](5 * time.Minute)} }

// first records that reason (a Ready reason, or EventAccepted) is reported for uid,
// and says whether it is news: false when it is what was last reported for the object.
func (r *reported) first(uid types.UID, reason string) (news bool) {
	r.update(uid, func(last reportedTransition, ok bool) (reportedTransition, bool) {
		if reason == EventAccepted {
			news = !last.accepted
			last.accepted = true
		} else {
			news = !ok || last.reason != reason
			last.reason = reason
		}
		return last, news
	})
	return news
}

// grantedAfter lists, for each waiting reason, the reasons that can only follow once
// that access was granted: the engine resolves end-user access, then workload access,
// then calls the provider.
var grantedAfter = map[string]struct {
	cluster string
	next    map[string]bool
}{
	v1alpha1.ReasonWaitingForAccess: {metrics.ClusterEndUser, map[string]bool{
		v1alpha1.ReasonWaitingForWorkload: true, v1alpha1.ReasonWorkloadDenied: true,
		v1alpha1.ReasonProgressing: true, v1alpha1.ReasonReady: true, v1alpha1.ReasonProviderError: true,
	}},
	v1alpha1.ReasonWaitingForWorkload: {metrics.ClusterWorkload, map[string]bool{
		v1alpha1.ReasonProgressing: true, v1alpha1.ReasonReady: true, v1alpha1.ReasonProviderError: true,
	}},
}

// observeGrant records the time from request to grant when an object leaves a
// waiting state because the access was granted. The start is the waiting
// condition's transition time, which survives restarts of the runtime.
func (e *Engine[T]) observeGrant(p, mode, beforeReason, afterReason string, since metav1.Time) {
	g, ok := grantedAfter[beforeReason]
	if !ok || !g.next[afterReason] || since.IsZero() {
		return
	}
	metrics.AccessGrantDuration.WithLabelValues(p, mode, g.cluster).Observe(time.Since(since.Time).Seconds())
}

func resultOf(err error, released bool, st *v1alpha1.ServiceStatus) string {
	switch {
	case err != nil:
		return metrics.ResultError
	case released:
		return metrics.ResultReleased
	}
	cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	switch {
	case cond == nil:
		return metrics.ResultWaiting
	case cond.Status == metav1.ConditionTrue:
		return metrics.ResultReady
	case cond.Reason == v1alpha1.ReasonProgressing || cond.Reason == v1alpha1.ReasonDeleting:
		return metrics.ResultProgressing
	default:
		return metrics.ResultWaiting
	}
}

// writtenReason is the Ready reason as written on objects.
func (e *Engine[T]) writtenReason(r string) string {
	if e.opts.WrittenReason == nil {
		return r
	}
	return e.opts.WrittenReason(r)
}

func reasonOf(c *metav1.Condition) string {
	if c == nil {
		return ""
	}
	return c.Reason
}

// emit records an event on the Service object in its own cluster: the onboarding
// cluster in standard mode, the tenant's workspace (through the virtual workspace) in
// kcp mode. Event notes come from the status condition, which the tenant reads
// anyway; they never carry credentials.
func (e *Engine[T]) emit(ctx context.Context, t *Target[T], eventType, reason, action, note string) {
	if e.opts.EventSource == "" || t.Cluster == nil {
		return
	}
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	// The recorder sends asynchronously; a failure (e.g. a tenant who did not accept
	// the events claim) is logged by client-go and costs nothing else.
	e.recorder.eventf(t.Cluster, t.Object, eventType, reason, action, note)
	metrics.EventsTotal.WithLabelValues(e.opts.Provider, string(e.opts.Tenancy.Mode()), eventType, reason).Inc()
	log.FromContext(ctx).V(1).Info("event", "type", eventType, "reason", reason)
}

// publish makes the engine's clusters and objects part of the scrape-time gauges
// until ctx ends. It runs as a leader-election runnable, so only the mode's leader
// reports them.
func (e *Engine[T]) publish(ctx context.Context) error {
	remove := metrics.AddEngine(e.source())
	defer remove()
	<-ctx.Done()
	return nil
}

// source is the engine as the scrape-time gauges see it.
func (e *Engine[T]) source() metrics.EngineSource {
	return metrics.EngineSource{
		Provider: e.opts.Provider,
		Mode:     string(e.opts.Tenancy.Mode()),
		Engaged:  e.clusters.Len,
		Objects: func(ctx context.Context) []metrics.ObjectState {
			var out []metrics.ObjectState
			e.clusters.each(ctx, func(_ string, o client.Object) {
				po, ok := o.(provider.Object)
				if !ok {
					return
				}
				st := po.GetServiceStatus()
				s := metrics.ObjectState{Phase: string(st.Phase), Since: po.GetCreationTimestamp().Time}
				if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
					s.Reason, s.Ready = c.Reason, c.Status == metav1.ConditionTrue
					if !c.LastTransitionTime.IsZero() {
						s.Since = c.LastTransitionTime.Time
					}
				}
				out = append(out, s)
			})
			return out
		},
	}
}

// each calls fn for every object of the engine's type in the engaged clusters, read
// from their caches.
func (s *clusterSet) each(ctx context.Context, fn func(cluster string, o client.Object)) {
	s.mu.RLock()
	lists := map[string]func() (client.ObjectList, error){}
	for name, e := range s.clusters {
		lists[name] = func() (client.ObjectList, error) {
			l := s.newList()
			return l, e.cl.GetCache().List(ctx, l)
		}
	}
	s.mu.RUnlock()
	for name, list := range lists {
		l, err := list()
		if err != nil {
			continue
		}
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			if co, ok := o.(client.Object); ok {
				fn(name, co)
			}
			return nil
		})
	}
}

// requestIdentity is the tenant identity the mode derives from a request alone (every
// mode derives it from the cluster name and the object key).
func (e *Engine[T]) requestIdentity(req mcreconcile.Request) string {
	obj := e.opts.NewObject()
	obj.SetNamespace(req.Namespace)
	obj.SetName(req.Name)
	return e.opts.Tenancy.Target(string(req.ClusterName), nil, obj).Identity.String()
}

// logConstructor gives every log line about a request, controller-runtime's own
// ("Reconciler error") included, the mode, workspace (cluster name), object key and
// tenant identity, so an operator can follow one tenant through the log.
func (e *Engine[T]) logConstructor(base logr.Logger) func(*mcreconcile.Request) logr.Logger {
	return func(req *mcreconcile.Request) logr.Logger {
		if req == nil {
			return base
		}
		return base.WithValues("mode", e.opts.Tenancy.Mode(), "workspace", string(req.ClusterName),
			"object", req.NamespacedName.String(), "identity", e.requestIdentity(*req))
	}
}
