package metrics

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStateGauges checks the scrape-time gauges: counted by phase and reason, the
// oldest not-Ready age per reason, access states derived from reasons, and two
// sources with the same labels summed instead of failing the scrape.
func TestStateGauges(t *testing.T) {
	now := time.Now()
	objects := []ObjectState{
		{Phase: "Ready", Reason: "Ready", Ready: true, Since: now.Add(-time.Hour)},
		{Phase: "Progressing", Reason: "WaitingForWorkloadCluster", Since: now.Add(-90 * time.Second)},
		{Phase: "Progressing", Reason: "WaitingForWorkloadCluster", Since: now.Add(-30 * time.Second)},
		{Phase: "Progressing", Reason: "AccessDenied", Since: now.Add(-10 * time.Second)},
		{Since: now.Add(-5 * time.Second)}, // never reconciled
	}
	src := EngineSource{Provider: "p", Mode: "kcp", Engaged: func() int { return 3 },
		Objects: func(context.Context) []ObjectState { return objects }}
	defer AddEngine(src)()
	defer AddEngine(src)() // the same provider twice in one process: summed
	defer AddProcess(ProcessSource{Provider: "p", Leaders: func() map[string]bool { return map[string]bool{"kcp": true, "standard": false} },
		KCPActive: func() bool { return true }})()

	got := map[string]float64{}
	ages := map[string]float64{}
	for _, m := range collect(t) {
		if m.name == "serviceprovider_engine_oldest_not_ready_seconds" {
			ages[m.labels["reason"]] = m.value
			continue
		}
		got[m.key()] = m.value
	}
	want := map[string]float64{
		`serviceprovider_engine_workspaces_engaged{mode="kcp",provider="p"}`:                                             6,
		`serviceprovider_engine_objects{mode="kcp",phase="Pending",provider="p",reason="None"}`:                          2,
		`serviceprovider_engine_objects{mode="kcp",phase="Progressing",provider="p",reason="AccessDenied"}`:              2,
		`serviceprovider_engine_objects{mode="kcp",phase="Progressing",provider="p",reason="WaitingForWorkloadCluster"}`: 4,
		`serviceprovider_engine_objects{mode="kcp",phase="Ready",provider="p",reason="Ready"}`:                           2,
		`serviceprovider_access_requests{cluster="enduser",mode="kcp",provider="p",state="denied"}`:                      2,
		`serviceprovider_access_requests{cluster="workload",mode="kcp",provider="p",state="pending"}`:                    4,
		`serviceprovider_manager_leader{mode="kcp",provider="p"}`:                                                        1,
		`serviceprovider_manager_leader{mode="standard",provider="p"}`:                                                   0,
		`serviceprovider_kcp_active{provider="p"}`:                                                                       1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s", k)
		}
	}

	// The age gauge keeps the oldest per reason (its exact value moves with the clock).
	if len(ages) != 3 {
		t.Errorf("ages %v, want one per not-Ready reason", ages)
	}
	if a := ages["WaitingForWorkloadCluster"]; a < 90 || a > 100 {
		t.Errorf("oldest WaitingForWorkloadCluster %v s, want about 90", a)
	}
	if _, ok := ages["Ready"]; ok {
		t.Error("Ready objects are counted as not ready")
	}
}

type collected struct {
	name   string
	labels map[string]string
	value  float64
}

// key renders the series as in the text format, labels sorted.
func (c collected) key() string {
	names := make([]string, 0, len(c.labels))
	for n := range c.labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+`="`+c.labels[n]+`"`)
	}
	return c.name + "{" + strings.Join(parts, ",") + "}"
}

func collect(t *testing.T) []collected {
	t.Helper()
	reg := prometheusRegistry(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []collected
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, collected{mf.GetName(), l, m.GetGauge().GetValue()})
		}
	}
	return out
}

// TestNoSourceNoSeries: without running engines the scrape has no state series at
// all, so a standby replica reports nothing rather than zeros.
func TestNoSourceNoSeries(t *testing.T) {
	if n := len(collect(t)); n != 0 {
		t.Errorf("%d series without sources", n)
	}
}

func prometheusRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(state); err != nil {
		t.Fatal(err)
	}
	return reg
}
