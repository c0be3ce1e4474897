package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcluster "sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// recorder records the engine's events on Service objects, in whichever cluster holds
// each object, through one client-go events broadcaster for all of them.
//
// The per-workspace recorders of kcp's multicluster-provider cost memory per workspace
// (measured: docs/design/observability.md). One broadcaster keeps client-go's
// queueing, correlation and retries; its sink routes each event to the cluster of the
// object it regards.
type recorder struct {
	broadcaster events.EventBroadcaster
	sink        *routingSink

	once sync.Once
	rec  events.EventRecorder
	src  string
}

func newRecorder(source, replica string) *recorder {
	sink := &routingSink{clusters: newMemory[ctrlcluster.Cluster](eventRouteMemory)}
	return &recorder{broadcaster: events.NewBroadcaster(ReportingAs(sink, replica)), sink: sink, src: source}
}

// eventRouteMemory is how long an object's cluster is remembered after an event on it:
// longer than the broadcaster takes to send it, and its patches of a series.
const eventRouteMemory = 10 * time.Minute

// Start sends the recorded events while the manager runs. The recorder starts without
// waiting for leadership, so that it records before the first reconcile does.
func (r *recorder) Start(ctx context.Context) error {
	if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("starting the event broadcaster: %w", err)
	}
	<-ctx.Done()
	r.broadcaster.Shutdown()
	return nil
}

// NeedLeaderElection is false: see Start.
func (r *recorder) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = &recorder{}

// eventf records an event on obj, which cl holds.
func (r *recorder) eventf(cl ctrlcluster.Cluster, obj client.Object, eventType, reason, action, note string) {
	r.once.Do(func() { r.rec = r.broadcaster.NewRecorder(cl.GetScheme(), r.src) })
	r.sink.route(obj.GetUID(), cl)
	r.rec.Eventf(obj, nil, eventType, reason, action, "%s", note)
}

// routingSink sends each event through the cluster holding the object it regards.
type routingSink struct {
	clusters *memory[ctrlcluster.Cluster] // by the regarded object's UID
}

var _ events.EventSink = &routingSink{}

func (s *routingSink) route(uid types.UID, cl ctrlcluster.Cluster) {
	s.clusters.update(uid, func(ctrlcluster.Cluster, bool) (ctrlcluster.Cluster, bool) { return cl, true })
}

// to returns client-go's own sink for the cluster of ev's object.
func (s *routingSink) to(ev *eventsv1.Event) (*events.EventSinkImpl, error) {
	cl, ok := s.clusters.get(ev.Regarding.UID)
	if !ok {
		return nil, fmt.Errorf("no cluster known for the object of event %s/%s", ev.Namespace, ev.Name)
	}
	c, err := eventsv1client.NewForConfigAndClient(cl.GetConfig(), cl.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	return &events.EventSinkImpl{Interface: c}, nil
}

func (s *routingSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	sink, err := s.to(ev)
	if err != nil {
		return nil, err
	}
	return sink.Create(ctx, ev)
}

func (s *routingSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	sink, err := s.to(ev)
	if err != nil {
		return nil, err
	}
	return sink.Update(ctx, ev)
}

func (s *routingSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	sink, err := s.to(old)
	if err != nil {
		return nil, err
	}
	return sink.Patch(ctx, old, data)
}

// ReportingAs returns sink with instance as the reporting instance of the events it
// creates, in place of client-go's (controller and host name): with several replicas
// on one host, it tells which one recorded an event. An empty instance returns sink.
func ReportingAs(sink events.EventSink, instance string) events.EventSink {
	if instance == "" {
		return sink
	}
	return instanceSink{EventSink: sink, instance: instance}
}

type instanceSink struct {
	events.EventSink
	instance string
}

func (s instanceSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	ev = ev.DeepCopy()
	ev.ReportingInstance = s.instance
	return s.EventSink.Create(ctx, ev)
}
