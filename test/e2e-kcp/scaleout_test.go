package e2ekcp

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcp-dev/logicalcluster/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// scaleOutTenants is how many tenant workspaces the replicas share.
const scaleOutTenants = 30

// failoverLimit is how soon after a replica's SIGKILL a survivor must take the new
// objects in its workspaces (their finalizer written): above the lease duration the
// replicas run with (replicaLeaseDuration) plus a renewal period and the two listings
// in which the survivors publish the new view and read each other's.
// Becoming Ready takes the ordinary provisioning of a new object on top (a token, a
// workload cluster ordered and granted), whose time depends on the machine's load, not
// on the failover: it is logged and waited for, not bounded here. On 2026-12-05 a CI
// run measured 7 s to take over and 12-15 s to Ready on an idle machine, and Ready
// after p50 20.7 s with both CI slots busy.
const failoverLimit = 20 * time.Second

// TestReplicasShareWorkspaces runs kcp mode in three replica processes, as the
// openmcp-operator's Deployment does with --leader-elect=true, against a kcp of two
// shards with the tenants' workspaces on both, and checks that the replicas share
// them: each served by exactly one replica, a killed replica's workspaces served by
// the others within the lease, a paused one's (SIGSTOP past the lease) too and its
// share back after SIGCONT, and scaling down to one and back up to three keeps every
// workspace served. Every tenant's change is reconciled after each step, and the
// provider calls the replicas record never overlap in a workspace, but for a call in
// flight when a replica was paused (docs/design/replicas.md).
func TestReplicasShareWorkspaces(t *testing.T) {
	// On the shared platform as a provider of its own, but not beside the parallel
	// tests: its failover bound is a time (measured beside TestSoak when every
	// workspace had a Lease: the survivors took over after 20.2 s instead of 7-13 s).
	ctx := t.Context()
	e, platformKubeconfig := startReplicaPlatform(ctx, t, 2)
	k, pf, wl := e.k, e.pf, e.wl

	main := client.ObjectKey{Namespace: "default", Name: "main"}
	tenants := make([]tenant, scaleOutTenants)
	bind := func(i int) {
		tenants[i] = e.newTenantOn(ctx, t, fmt.Sprintf("scale-%02d", i), localenv.ShardName(i%2))
	}
	replicas := map[string]*replica{}
	// Every replica records its provider calls: which workspace it served and when.
	record := t.TempDir()
	start := func(name string) {
		r := e.startReplica(t, name, platformKubeconfig, replicaRecordEnv+"="+record)
		replicas[name] = r
	}
	var pauses []pause
	for _, name := range []string{"a", "b", "c"} {
		start(name)
	}
	for _, r := range replicas {
		wantProbe(ctx, t, r, "/readyz", 200)
	}
	// Both shards are in the endpoint slice before the first object, as on a
	// platform whose kcp has had its shards for a while. (A shard that joins later
	// makes the replicas divide the shards anew, and a workspace served meanwhile
	// may move: docs/design/replicas.md.)
	bind(0)
	bind(1)
	harness.Eventually(ctx, t, time.Minute, "one virtual workspace per shard", func(ctx context.Context) error {
		if urls := k.VirtualWorkspaceURLs(ctx, t, e.providerWS, e.name); len(urls) != 2 {
			return fmt.Errorf("the endpoint slice lists %v", urls)
		}
		return nil
	})

	began := time.Now()
	for i := range tenants {
		if i >= 2 {
			bind(i)
		}
		newWidget(ctx, t, tenants[i].c, main.Name, "blue")
	}
	eachTenant(t, tenants, func(t *testing.T, tn tenant) { waitReady(ctx, t, tn.c, main) })
	t.Logf("%d tenants Ready %s after the first object was created", len(tenants), time.Since(began).Round(100*time.Millisecond))

	owners := map[logicalcluster.Name]string{}
	t.Run("each workspace is served by exactly one replica, all replicas serve some", func(t *testing.T) {
		for _, tn := range tenants {
			owners[tn.lc] = soleWriter(ctx, t, tn, main, e.name+"-workload")
		}
		perReplica := map[string]int{}
		for _, o := range owners {
			perReplica[o]++
		}
		t.Logf("workspaces by the replica writing their objects: %v", perReplica)
		wantOwnedMetrics(ctx, t, replicas, perReplica)
		for name := range replicas {
			if perReplica[name] == 0 {
				t.Errorf("replica %s serves no workspace of %d", name, len(tenants))
			}
		}
		// The replicas divide the shards before the workspaces: three replicas over
		// two shards, each watches and serves the workspaces of one shard only.
		wantShardsDivided(ctx, t, replicas, tenants, owners)
		tokens := 0.0
		for _, r := range replicas {
			tokens += scrape(ctx, t, r).sum("serviceprovider_kcp_token_requests_total", labels{"kind": "new"})
		}
		if tokens != float64(len(tenants)) {
			t.Errorf("%v TokenRequests for %d workspaces, want one each", tokens, len(tenants))
		}
		// The events a tenant sees name the replica that recorded them.
		for _, tn := range tenants[:3] {
			evs := &eventsv1.EventList{}
			if err := tn.c.List(ctx, evs, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs.Items {
				if ev.Regarding.Name == main.Name && ev.ReportingInstance != owners[tn.lc] {
					t.Errorf("%s: event %s recorded by %q, want the serving replica %q", tn.path, ev.Reason, ev.ReportingInstance, owners[tn.lc])
				}
			}
		}
	})
	if t.Failed() {
		return
	}

	recolor := func(t *testing.T, color string) {
		eachTenant(t, tenants, func(t *testing.T, tn tenant) {
			harness.Patch(ctx, t, tn.c, main, func(w *widget.Widget) { w.Spec.Color = color })
			wantConfigMap(ctx, t, wl, tn.lc, "hello", color)
		})
	}
	t.Run("a killed replica's workspaces are served by the others within the lease", func(t *testing.T) {
		victim := busiest(owners)
		var affected []tenant
		for _, tn := range tenants {
			if owners[tn.lc] == victim {
				affected = append(affected, tn)
			}
		}
		// The victim releases its objects while it runs; after the kill, new ones
		// arrive in its workspaces.
		eachTenant(t, affected, func(t *testing.T, tn tenant) { harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main)) })
		replicas[victim].stop(syscall.SIGKILL, 0)
		killed := time.Now()
		delete(replicas, victim)
		eachTenant(t, affected, func(t *testing.T, tn tenant) { newWidget(ctx, t, tn.c, main.Name, "green") })
		taken, ready := failoverTimes(ctx, t, affected, main, killed)
		t.Logf("replica %s killed: its %d workspaces' new objects taken after p50 %s, max %s (lease %s), Ready after p50 %s, max %s",
			victim, len(affected), p50(taken), worst(taken), replicaLeaseDuration, p50(ready), worst(ready))
		if worst(taken) > failoverLimit {
			t.Errorf("the last new object was taken %s after the kill, want within %s", worst(taken), failoverLimit)
		}
		for _, tn := range affected {
			if w := soleWriter(ctx, t, tn, main, ""); w == victim {
				t.Errorf("%s: new object written by the killed replica", tn.path)
			} else {
				owners[tn.lc] = w
			}
		}
		// The two left divide the shards again, one each.
		for _, r := range replicas {
			wantMetric(ctx, t, r, "serviceprovider_kcp_virtual_workspaces", labels{"state": "served"}, 1)
		}
		recolor(t, "orange")
	})

	t.Run("a paused replica stops serving, and serves again when continued", func(t *testing.T) {
		// SIGSTOP past the lease, as a node that freezes a container: the other
		// takes its workspaces; on SIGCONT the paused one finds its membership lapsed,
		// stops, renews and takes its share back once the other has let it go.
		victim := slices.Sorted(maps.Keys(replicas))[0]
		p := pause{replica: victim, stopped: time.Now()}
		if err := replicas[victim].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		recolor(t, "teal")
		if held := time.Since(p.stopped); held < replicaLeaseDuration {
			t.Fatalf("every workspace reconciled %s after the pause, within the lease (%s): the paused replica served none", held, replicaLeaseDuration)
		}
		p.continued = time.Now()
		if err := replicas[victim].Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		pauses = append(pauses, p)
		t.Logf("replica %s paused for %s", victim, p.continued.Sub(p.stopped).Round(100*time.Millisecond))
		wantEachShares(ctx, t, replicas, len(tenants))
		recolor(t, "pink")
	})

	t.Run("scaling to one replica and back to three keeps every workspace served", func(t *testing.T) {
		names := slices.Sorted(maps.Keys(replicas))
		survivor := names[0]
		for _, name := range names[1:] {
			replicas[name].stop(syscall.SIGTERM, 30*time.Second)
			delete(replicas, name)
		}
		wantMetric(ctx, t, replicas[survivor], "serviceprovider_kcp_workspaces_owned", nil, float64(len(tenants)))
		wantMetric(ctx, t, replicas[survivor], "serviceprovider_kcp_virtual_workspaces", labels{"state": "served"}, 2)
		recolor(t, "yellow")
		for _, name := range []string{"d", "e"} {
			start(name)
		}
		wantEachShares(ctx, t, replicas, len(tenants))
		for _, r := range replicas {
			wantMetric(ctx, t, r, "serviceprovider_kcp_virtual_workspaces", labels{"state": "served"}, 1)
		}
		recolor(t, "purple")
		moved := 0.0
		for _, r := range replicas {
			moved += scrape(ctx, t, r).sum("serviceprovider_kcp_workspace_ownership_changes_total", labels{"kind": "released"})
		}
		if moved == 0 {
			t.Error("no replica released a workspace to the newcomers")
		}
	})

	t.Run("no workspace was served by two replicas at once", func(t *testing.T) {
		calls := recordedCalls(t, record)
		excused, violations := overlappingCalls(calls, pauses)
		t.Logf("%d provider calls recorded; %d overlaps of a call in flight at a pause (the documented bound)", len(calls), len(excused))
		for _, o := range excused {
			t.Logf("in flight at the pause: %s", o)
		}
		for _, o := range violations {
			t.Errorf("served by two replicas at once: %s", o)
		}
	})

	t.Run("nothing is left behind after deletion", func(t *testing.T) {
		eachTenant(t, tenants, func(t *testing.T, tn tenant) {
			harness.DeleteAndWait(ctx, t, tn.c, widgetAt(main))
			harness.Eventually(ctx, t, time.Minute, "no requests or workload objects of "+tn.lc.String(), func(ctx context.Context) error {
				if n := platformRequests(ctx, t, pf, tn.lc); n != 0 {
					return fmt.Errorf("%d platform requests", n)
				}
				if n := workloadObjects(ctx, t, wl, tn.lc); n != 0 {
					return fmt.Errorf("%d workload objects", n)
				}
				return nil
			})
		})
	})
}

// eachTenant runs fn for every tenant at once, each in a subtest.
func eachTenant(t *testing.T, tenants []tenant, fn func(*testing.T, tenant)) {
	t.Helper()
	t.Run("tenants", func(t *testing.T) {
		for _, tn := range tenants {
			t.Run(tn.path.Base(), func(t *testing.T) {
				t.Parallel()
				fn(t, tn)
			})
		}
	})
}

// soleWriter returns the replica whose writes the object's managed fields show, and
// fails the test unless exactly one replica wrote it and, with credential (the name of
// the provider's workload ServiceAccount, "" for none), the credential the runtime
// keeps in the workspace (which a replica taking over keeps). A replica's field
// manager is "serviceprovider.<replica>".
func soleWriter(ctx context.Context, t testing.TB, tn tenant, key client.ObjectKey, credential string) string {
	t.Helper()
	w := &widget.Widget{}
	if err := tn.c.Get(ctx, key, w); err != nil {
		t.Fatal(err)
	}
	fields := w.ManagedFields
	if credential != "" {
		sa := &corev1.ServiceAccount{}
		if err := tn.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: credential}, sa); err != nil {
			t.Fatal(err)
		}
		fields = slices.Concat(fields, sa.ManagedFields)
	}
	var writers []string
	for _, f := range fields {
		if name, ok := strings.CutPrefix(f.Manager, "serviceprovider."); ok && !slices.Contains(writers, name) {
			writers = append(writers, name)
		}
	}
	if len(writers) != 1 {
		t.Errorf("%s: %s written by replicas %v, want exactly one", tn.path, key, writers)
		return ""
	}
	return writers[0]
}

// wantOwnedMetrics waits until each replica reports owning the workspaces it writes.
func wantOwnedMetrics(ctx context.Context, t testing.TB, replicas map[string]*replica, perReplica map[string]int) {
	t.Helper()
	for name, r := range replicas {
		wantMetric(ctx, t, r, "serviceprovider_kcp_workspaces_owned", nil, float64(perReplica[name]))
		wantMetric(ctx, t, r, "serviceprovider_kcp_replicas", nil, float64(len(replicas)))
	}
}

// wantShardsDivided checks that each replica serves the workspaces of one kcp shard
// (tenant i is on shard i mod 2) and reports serving one virtual workspace while it
// watches both: with at least as many replicas as shards, no replica holds the
// watches of a shard it does not serve.
func wantShardsDivided(ctx context.Context, t testing.TB, replicas map[string]*replica, tenants []tenant, owners map[logicalcluster.Name]string) {
	t.Helper()
	shardsOf := map[string][]string{}
	for i, tn := range tenants {
		if o, shard := owners[tn.lc], localenv.ShardName(i%2); !slices.Contains(shardsOf[o], shard) {
			shardsOf[o] = append(shardsOf[o], shard)
		}
	}
	for name, shards := range shardsOf {
		if len(shards) != 1 {
			t.Errorf("replica %s serves workspaces of shards %v, want of one shard only", name, shards)
		}
	}
	for _, r := range replicas {
		wantMetric(ctx, t, r, "serviceprovider_kcp_virtual_workspaces", labels{"state": "served"}, 1)
		wantMetric(ctx, t, r, "serviceprovider_kcp_virtual_workspaces", labels{"state": "watched"}, 2)
	}
}

// busiest is the replica serving the most workspaces.
func busiest(owners map[logicalcluster.Name]string) string {
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	best := ""
	for name, n := range count {
		if best == "" || n > count[best] || n == count[best] && name < best {
			best = name
		}
	}
	return best
}

// failoverTimes waits until the object key of every tenant is Ready and returns, each
// sorted, how long after since each was taken by a replica (its finalizer written) and
// how long after since it was Ready.
func failoverTimes(ctx context.Context, t *testing.T, tenants []tenant, key client.ObjectKey, since time.Time) (taken, ready []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	takenAt, readyAt := map[logicalcluster.Name]time.Duration{}, map[logicalcluster.Name]time.Duration{}
	harness.Eventually(ctx, t, 2*time.Minute, "new objects Ready", func(ctx context.Context) error {
		var wg sync.WaitGroup
		for _, tn := range tenants {
			mu.Lock()
			_, done := readyAt[tn.lc]
			mu.Unlock()
			if done {
				continue
			}
			wg.Go(func() {
				w := &widget.Widget{}
				if err := tn.c.Get(ctx, key, w); err != nil {
					return
				}
				now := time.Since(since)
				mu.Lock()
				defer mu.Unlock()
				if _, ok := takenAt[tn.lc]; !ok && len(w.Finalizers) > 0 {
					takenAt[tn.lc] = now
				}
				if isReady(w) {
					readyAt[tn.lc] = now
				}
			})
		}
		wg.Wait()
		if len(readyAt) < len(tenants) {
			return fmt.Errorf("%d of %d Ready", len(readyAt), len(tenants))
		}
		return nil
	})
	return slices.Sorted(maps.Values(takenAt)), slices.Sorted(maps.Values(readyAt))
}

func p50(d []time.Duration) time.Duration   { return d[len(d)/2].Round(10 * time.Millisecond) }
func worst(d []time.Duration) time.Duration { return d[len(d)-1].Round(10 * time.Millisecond) }

// wantEachShares waits until the replicas together own the tenants' workspaces, each
// owning some.
func wantEachShares(ctx context.Context, t testing.TB, replicas map[string]*replica, tenants int) {
	t.Helper()
	harness.Eventually(ctx, t, time.Minute, fmt.Sprintf("%d replicas each serving a share", len(replicas)), func(ctx context.Context) error {
		total, shares := 0.0, map[string]float64{}
		for name, r := range replicas {
			m, err := tryScrape(ctx, r)
			if err != nil {
				return err
			}
			shares[name] = m.sum("serviceprovider_kcp_workspaces_owned", nil)
			total += shares[name]
		}
		if total != float64(tenants) || slices.Contains(slices.Collect(maps.Values(shares)), 0) {
			return fmt.Errorf("owned %v", shares)
		}
		return nil
	})
}
