package metrics

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
)

// ObjectState is what the scrape-time gauges know of one Service object.
type ObjectState struct {
	// Phase is status.phase; empty before the runtime first wrote the status.
	Phase string
	// Reason is the Ready condition's reason; empty without the condition.
	Reason string
	// Ready says whether the Ready condition is True.
	Ready bool
	// Since is when the Ready condition last changed, or the object's creation time
	// without one.
	Since time.Time
}

// EngineSource is a running engine (one mode) as the scrape-time gauges see it.
type EngineSource struct {
	Provider, Mode string
	// Engaged returns how many clusters (workspaces in kcp mode, the onboarding
	// cluster in standard mode) the engine serves.
	Engaged func() int
	// Objects returns the state of every Service object of the engaged clusters. It
	// reads informer caches only.
	Objects func(ctx context.Context) []ObjectState
}

// ProcessSource is a running Runtime as the scrape-time gauges see it.
type ProcessSource struct {
	Provider string
	// Leaders reports, for each mode whose manager runs in this process, whether it
	// holds that mode's leader lease (always true without leader election).
	Leaders func() map[string]bool
	// KCPActive reports whether kcp mode runs; nil when the provider has no kcp
	// surface.
	KCPActive func() bool
}

// AddEngine makes an engine's state part of every scrape until remove is called.
func AddEngine(s EngineSource) (remove func()) { return state.add(&s) }

// AddProcess makes a Runtime's state part of every scrape until remove is called.
func AddProcess(s ProcessSource) (remove func()) { return state.add(&s) }

// Phase label for objects whose status the runtime has not written yet.
const phasePending = "Pending"

// Reason label for objects without a Ready condition.
const reasonNone = "None"

// scrapeTimeout bounds how long one scrape may spend listing caches.
const scrapeTimeout = 5 * time.Second

var (
	descEngaged = prometheus.NewDesc(Namespace+"_engine_workspaces_engaged",
		"Clusters the engine serves: kcp workspaces that bound the APIExport (kcp mode), the onboarding cluster (standard mode). Reported by the mode's leader.",
		[]string{"provider", "mode"}, nil)
	descObjects = prometheus.NewDesc(Namespace+"_engine_objects",
		"Service objects in the engaged clusters, by status.phase (Pending: not reconciled yet) and Ready reason (None: no condition yet).",
		[]string{"provider", "mode", "phase", "reason"}, nil)
	descNotReady = prometheus.NewDesc(Namespace+"_engine_oldest_not_ready_seconds",
		"For each Ready reason, how long the object longest in that state has not been Ready (since the Ready condition last changed, or since creation).",
		[]string{"provider", "mode", "reason"}, nil)
	descAccess = prometheus.NewDesc(Namespace+"_access_requests",
		"Service objects whose cluster access is pending or was denied by the platform, by cluster kind (enduser, workload).",
		[]string{"provider", "mode", "cluster", "state"}, nil)
	descLeader = prometheus.NewDesc(Namespace+"_manager_leader",
		"1 when this process leads the mode (holds its leader lease, or runs without leader election), else 0.",
		[]string{"provider", "mode"}, nil)
	descKCPActive = prometheus.NewDesc(Namespace+"_kcp_active",
		"1 while kcp mode runs in this process (spec.kcp is set, the APIExport is provisioned and the kcp manager started), else 0.",
		[]string{"provider"}, nil)
)

// accessStates maps the Ready reasons that describe an access request to the
// (cluster, state) of descAccess.
var accessStates = map[string][2]string{
	v1alpha1.ReasonWaitingForAccess:   {ClusterEndUser, "pending"},
	v1alpha1.ReasonAccessDenied:       {ClusterEndUser, "denied"},
	v1alpha1.ReasonWaitingForWorkload: {ClusterWorkload, "pending"},
	v1alpha1.ReasonWorkloadDenied:     {ClusterWorkload, "denied"},
}

// stateCollector computes the scrape-time gauges from the registered sources. Two
// sources with the same labels (two Runtimes of one provider in one process, as in
// tests) are summed, so a scrape never fails on duplicate series.
type stateCollector struct {
	mu      sync.Mutex
	sources map[any]struct{}
}

var state = &stateCollector{sources: map[any]struct{}{}}

func (c *stateCollector) add(s any) func() {
	c.mu.Lock()
	c.sources[s] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.sources, s)
		c.mu.Unlock()
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEngaged, descObjects, descNotReady, descAccess, descLeader, descKCPActive} {
		ch <- d
	}
}

// series accumulates one gauge's values by label values.
type series struct {
	desc   *prometheus.Desc
	values map[string]float64
	max    bool // keep the maximum instead of the sum
}

func newSeries(d *prometheus.Desc, max bool) *series {
	return &series{desc: d, values: map[string]float64{}, max: max}
}

func (s *series) add(v float64, labels ...string) {
	k := strings.Join(labels, "\x00")
	if cur, ok := s.values[k]; ok && s.max {
		if v > cur {
			s.values[k] = v
		}
		return
	}
	s.values[k] += v
}

func (s *series) emit(ch chan<- prometheus.Metric) {
	keys := make([]string, 0, len(s.values))
	for k := range s.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, s.values[k], strings.Split(k, "\x00")...)
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := make([]any, 0, len(c.sources))
	for s := range c.sources {
		sources = append(sources, s)
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := time.Now()
	engaged, objects, notReady, accessReqs := newSeries(descEngaged, false), newSeries(descObjects, false), newSeries(descNotReady, true), newSeries(descAccess, false)
	leader, kcp := newSeries(descLeader, true), newSeries(descKCPActive, true)
	for _, s := range sources {
		switch s := s.(type) {
		case *EngineSource:
			engaged.add(float64(s.Engaged()), s.Provider, s.Mode)
			for _, o := range s.Objects(ctx) {
				phase, reason := o.Phase, o.Reason
				if phase == "" {
					phase = phasePending
				}
				if reason == "" {
					reason = reasonNone
				}
				objects.add(1, s.Provider, s.Mode, phase, reason)
				if !o.Ready {
					notReady.add(now.Sub(o.Since).Seconds(), s.Provider, s.Mode, reason)
				}
				if a, ok := accessStates[o.Reason]; ok {
					accessReqs.add(1, s.Provider, s.Mode, a[0], a[1])
				}
			}
		case *ProcessSource:
			for mode, leads := range s.Leaders() {
				leader.add(boolValue(leads), s.Provider, mode)
			}
			if s.KCPActive != nil {
				kcp.add(boolValue(s.KCPActive()), s.Provider)
			}
		}
	}
	for _, s := range []*series{engaged, objects, notReady, accessReqs, leader, kcp} {
		s.emit(ch)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
