package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clustersv1alpha1 "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/api/v1alpha1"
	"github.com/openmcp-project/kcp-serviceprovider/internal/access"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// replicaShards is the number of kcp shards of the replica runs.
const replicaShards = 2

// settleTime is how long the replicas' shares must stay the same to count as
// settled: three of the runtime's default decision ticks (2 s).
const settleTime = 6 * time.Second

// replicaRun is kcp mode served by some replicas on a sharded kcp.
type replicaRun struct {
	n, replicas int
	// allReady: first creation to last Ready.
	allReady time.Duration
	// floor is the floor on the same sharded kcp, measured in the 1-replica run only
	// (zero otherwise, or with -skip-floor).
	floor phase
	// pfloor is the floor that also waits for the platform's grants, measured
	// likewise.
	pfloor phase
	// rssPeak is each replica's peak RSS (MiB) while the objects became Ready, and
	// rssParts what it was made of.
	rssPeak  []float64
	rssParts []rssParts
	// owned is each replica's share of the workspaces.
	owned []int
	// failover: after the SIGKILL of the replica serving the most workspaces, kill to
	// Ready of each of its objects, changed right after the kill; sorted. Empty with
	// one replica.
	failover []time.Duration
	// steady is each replica's requests in the steady-state window after
	// convergence (-steady; the membership renewals among them).
	steady []snapshot
	// renewal is the period at which the platform renews the access tokens the
	// runtime holds (80 % of their lifetime, access.RenewAt): the runtime reads an
	// access Secret again once per period.
	renewal time.Duration
	window  time.Duration
	// baseline names the commit whose runtime ran (-baseline); empty for this one.
	baseline string
}

// runReplicas measures kcp mode with n tenant workspaces over a kcp of two shards,
// served by the given number of runtime processes, each started as the operator
// starts a provider's replicas (--leader-elect, default lease timings).
func runReplicas(ctx context.Context, env *localenv.Env, n, replicas int, opts benchOptions) (replicaRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := replicaRun{n: n, replicas: replicas}
	e, err := startKCPEnv(ctx, env, false, replicaShards)
	if err != nil {
		return res, err
	}
	if err := e.createTenants(ctx, n); err != nil {
		return res, err
	}
	logf("replicas n=%d r=%d: %d workspaces bound over %d shards (%d virtual workspaces)", n, replicas, n, replicaShards, len(e.vwURLs))
	// The floor once per size, on a kcp like the one the runtime then serves, and,
	// as in runKCP, before the runtime starts: its platform requests granted and
	// released (floor ends with settleFloorRequests) and its objects gone before the
	// watcher below counts Ready ones.
	if replicas == 1 && !opts.skipFloor {
		if res.floor, err = e.floor(ctx, writesFloor); err != nil {
			return res, fmt.Errorf("floor: %w", err)
		}
		logf("replicas n=%d: floor %s", n, res.floor.total.Round(time.Millisecond))
		if res.pfloor, err = e.floor(ctx, platformFloor); err != nil {
			return res, fmt.Errorf("floor with the platform: %w", err)
		}
		logf("replicas n=%d: floor with the platform %s", n, res.pfloor.total.Round(time.Millisecond))
	}
	// The watcher reads every shard's virtual workspace as the runtime's identity
	// (a client certificate on a sharded kcp: docs/design/sharded-kcp.md).
	cfgs := make([]*rest.Config, 0, len(e.vwURLs))
	for _, url := range e.vwURLs {
		cfg := rest.CopyConfig(e.vwID)
		cfg.Host = url + "/clusters/*"
		cfgs = append(cfgs, cfg)
	}
	watcher, err := watchReady(ctx, cfgs...)
	if err != nil {
		return res, err
	}

	var rts []*runtimeProcess
	for i := range replicas {
		rt, err := startRuntimeProcess(ctx, e.env, fmt.Sprintf("replica-%d", i), e.platform.Kubeconfig(), opts, true)
		if err != nil {
			return res, err
		}
		rts = append(rts, rt)
	}
	if err := e.pf.Create(ctx, &widget.WidgetConfig{ObjectMeta: metav1.ObjectMeta{Name: providerName}, Spec: widget.WidgetConfigSpec{
		Greeting: "hello",
		KCP:      &v1alpha1.KCP{ProviderWorkspace: providerWS, KubeconfigSecret: v1alpha1.SecretReference{Name: kcpSecretName, Namespace: kcpSecretNS}},
	}}); err != nil {
		return res, err
	}
	// Every workspace engaged in exactly one replica before the objects come, and the
	// shares settled: every replica sees the others and no workspace moved for a few
	// decision ticks (a replica that starts alone takes what it can until it sees the
	// others).
	var shares string
	settled := time.Now()
	err = localenv.Poll(ctx, 5*time.Minute, "workspaces shared out", func(context.Context) error {
		var owned []int
		for _, rt := range rts {
			if err := rt.active(); err != nil {
				return err
			}
			if seen := rt.metric("serviceprovider_kcp_replicas"); seen != replicas {
				return fmt.Errorf("a replica sees %d replicas", seen)
			}
			owned = append(owned, rt.owned())
		}
		if now := fmt.Sprint(owned); now != shares {
			shares, settled = now, time.Now()
		}
		if total := sum(owned); total != n || slices.Contains(owned, 0) {
			return fmt.Errorf("shares %v of %d workspaces", owned, n)
		}
		if time.Since(settled) < settleTime {
			return fmt.Errorf("shares %v for %s", owned, time.Since(settled).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	pids := make([]string, 0, len(rts))
	for _, rt := range rts {
		resetPeakRSS(rt.pid())
		res.owned = append(res.owned, rt.owned())
		pids = append(pids, rt.pid())
	}

	stopSampling := sampleRSSParts(pids, 500*time.Millisecond)
	defer stopSampling()
	start := time.Now()
	if _, err := e.createWidgets(ctx, "main"); err != nil {
		return res, err
	}
	ready, err := watcher.waitAll(ctx, n, convergeTimeout(n))
	if err != nil {
		return res, err
	}
	res.allReady = lastOf(ready).Sub(start)
	res.rssParts = stopSampling()
	for _, rt := range rts {
		_, peak := rss(rt.pid())
		res.rssPeak = append(res.rssPeak, peak)
		rt.saveProfiles(fmt.Sprintf("replicas-%d-of-%d%s-%s-converged", n, replicas, opts.baseline, rt.child.Name))
	}
	logf("replicas n=%d r=%d: all Ready %s, peak RSS %v MiB (anonymous, file: %v), shares %v", n, replicas, res.allReady.Round(time.Millisecond), res.rssPeak, res.rssParts, res.owned)
	if res.steady, err = steadyWindow(rts, opts.steady); err != nil {
		return res, err
	}
	res.window = opts.steady
	if res.renewal, err = e.renewalPeriod(ctx); err != nil {
		return res, err
	}
	if replicas < 2 {
		return res, nil
	}
	res.failover, err = e.failover(ctx, rts, watcher)
	return res, err
}

// steadyWindow returns each replica's requests during window, once every object is
// Ready: a measurement window, not a wait for anything.
func steadyWindow(rts []*runtimeProcess, window time.Duration) ([]snapshot, error) {
	if window <= 0 {
		return nil, nil
	}
	before := make([]snapshot, len(rts))
	for i, rt := range rts {
		s, err := rt.snapshot()
		if err != nil {
			return nil, err
		}
		before[i] = s
	}
	time.Sleep(window)
	out := make([]snapshot, len(rts))
	for i, rt := range rts {
		s, err := rt.snapshot()
		if err != nil {
			return nil, err
		}
		out[i] = s.sub(before[i])
	}
	return out, nil
}

// failover SIGKILLs the replica serving the most workspaces, changes the object of
// each of its workspaces at once, and returns, sorted, kill to Ready of each.
func (e *kcpEnv) failover(ctx context.Context, rts []*runtimeProcess, watcher *readyWatcher) ([]time.Duration, error) {
	victim := rts[0]
	for _, rt := range rts[1:] {
		if rt.owned() > victim.owned() {
			victim = rt
		}
	}
	// Its workspaces: those whose object it wrote (field manager
	// "serviceprovider.<replica>").
	manager := "serviceprovider." + victim.child.Name
	var mu sync.Mutex
	var affected []tenant
	err := parallel(len(e.tenants), 4*concurrency, func(i int) error {
		w := &widget.Widget{}
		if err := e.tenants[i].c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "main"}, w); err != nil {
			return err
		}
		if slices.ContainsFunc(w.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == manager }) {
			mu.Lock()
			affected = append(affected, e.tenants[i])
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(affected) == 0 {
		return nil, fmt.Errorf("no object written by %s", manager)
	}
	keys := make([]string, len(affected))
	for i, tn := range affected {
		keys[i] = tn.lc.String() + "/default/main"
	}
	// Each affected object counts again once its status caught up with the change.
	watcher.forget(keys)
	if err := victim.child.Kill(); err != nil {
		return nil, fmt.Errorf("killing %s: %w", victim.child.Name, err)
	}
	killed := time.Now()
	err = parallel(len(affected), 4*concurrency, func(i int) error {
		tn := affected[i]
		w := &widget.Widget{}
		if err := tn.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "main"}, w); err != nil {
			return err
		}
		w.Spec.Color = "green"
		return tn.c.Update(ctx, w)
	})
	if err != nil {
		return nil, err
	}
	ready, err := watcher.waitAll(ctx, len(e.tenants), 5*time.Minute)
	if err != nil {
		return nil, err
	}
	var took []time.Duration
	for _, k := range keys {
		took = append(took, ready[k].Sub(killed))
	}
	slices.Sort(took)
	logf("  failover of %d workspaces: p50 %s, max %s", len(took), percentile(took, 0.5).Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	return took, nil
}

// replicaSection writes the replica runs.
func (r *report) replicaSection(w func(string, ...any)) {
	if len(r.replicas) == 0 {
		return
	}
	w("## kcp mode across replicas, on a kcp of %d shards", replicaShards)
	w("")
	w("Tenant workspaces spread evenly over the shards, served by one runtime process and by two (each `--leader-elect`, default timings of kcp mode: a membership Lease per replica of 8 s, renewed every 2.5 s with a renewal deadline of 5 s, members listed and ownership decided every second; each replica watches and serves the workspaces of one shard; docs/design/replicas.md), in the same run on the same machine, each on a fresh platform with the real openmcp-operator. *All Ready*: first object created to last Ready. *Floor*: the kcp section's floor on the same sharded kcp, measured once per size in the 1-replica run before its runtime starts, with the runtime's identity there (a client-certificate user, docs/design/sharded-kcp.md): each tenant's writes through the virtual workspace of its own shard, its TokenRequest through the front-proxy; *all Ready vs floor* compares both rows of the size with it; *floor with the platform* also waits for each grant and reads the access Secret (the kcp section says how), measured right after the floor. *Peak RSS*: each replica's while the objects became Ready; *of it* splits it into the replica's own (anonymous) memory, its peak sampled every 0.5 s, and its file-backed pages, nearly all of them the executable's that it read (code, function tables, read-only data), which are the same in every replica whatever it serves. *Failover*: the replica serving the most workspaces is killed with SIGKILL and the object of each of its workspaces changed at once; kill to Ready (status caught up with the change) of each.")
	w("")
	w("| workspaces | replicas | shares | floor with the platform: all done | all Ready | all Ready vs floor with the platform | floor: all done | all Ready vs floor | vs 1 replica | peak RSS per replica (MiB) | largest vs 1 replica | of it: anonymous / file (MiB) | failover p50 | failover max | steady: requests / writes / Lease writes / Secret reads per min, per replica |")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	base := map[int]replicaRun{}
	for _, run := range r.replicas {
		if run.replicas == 1 {
			base[run.n] = run
		}
	}
	var rows []replicaRun
	for _, run := range r.replicas {
		rows = append(rows, run)
		for _, old := range r.replicasBase {
			if old.n == run.n && old.replicas == run.replicas {
				rows = append(rows, old)
			}
		}
	}
	for _, run := range rows {
		b, ok := base[run.n]
		vsReady, vsRSS := "", ""
		if ok && run.replicas > 1 {
			vsReady = ratio(run.allReady.Seconds(), b.allReady.Seconds())
			vsRSS = ratio(slices.Max(run.rssPeak), slices.Max(b.rssPeak))
		}
		// The floor is measured in the 1-replica run; every run of the size compares
		// with it.
		floor, vsFloor := "", ""
		if run.floor.total > 0 {
			floor = secs(run.floor.total)
		}
		if ok && b.floor.total > 0 {
			vsFloor = ratio(run.allReady.Seconds(), b.floor.total.Seconds())
		}
		pfloor, vsPFloor := "", ""
		if run.pfloor.total > 0 {
			pfloor = secs(run.pfloor.total)
		}
		if ok && b.pfloor.total > 0 {
			vsPFloor = ratio(run.allReady.Seconds(), b.pfloor.total.Seconds())
		}
		rssList := make([]string, len(run.rssPeak))
		for i, v := range run.rssPeak {
			rssList[i] = fmt.Sprintf("%.0f", v)
		}
		partsList := make([]string, len(run.rssParts))
		for i, p := range run.rssParts {
			partsList[i] = fmt.Sprintf("%.0f / %.0f", p.anonPeak, p.file)
		}
		p50, worst := "", ""
		if len(run.failover) > 0 {
			p50, worst = secs(percentile(run.failover, 0.5)), secs(run.failover[len(run.failover)-1])
		}
		name := strconv.Itoa(run.replicas)
		if run.baseline != "" {
			name = fmt.Sprintf("%d, **before** (%s)", run.replicas, strings.TrimPrefix(run.baseline, "-"))
		}
		var steady []string
		for _, st := range run.steady {
			perMin := run.window.Minutes()
			steady = append(steady, fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", float64(st.total())/perMin, float64(st.writes())/perMin,
				float64(st.leaseWrites())/perMin, float64(st.secretReads())/perMin))
		}
		w("| %d | %s | %v | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", run.n, name, run.owned, pfloor, secs(run.allReady), vsPFloor, floor, vsFloor, vsReady,
			strings.Join(rssList, ", "), vsRSS, strings.Join(partsList, "; "), p50, worst, strings.Join(steady, "; "))
	}
	w("")
	r.replicaTargets(w, base)
	w("All Ready here is set by the real operator's scheduler (docs/benchmarks.md, kcp section; docs/design/real-operator.md), so the two runs compare the runtime's share of it only; the floor does not wait for the operator's grants, so *all Ready vs floor* includes them, as the kcp section's runtime / floor does.")
	w("")
}

// replicaTargets is issues 36's and 51's table for every size run with several
// replicas; the comparisons with one replica need that size's 1-replica run.
func (r *report) replicaTargets(w func(string, ...any), base map[int]replicaRun) {
	header := false
	for _, run := range r.replicas {
		if run.replicas < 2 || len(run.failover) == 0 {
			continue
		}
		if !header {
			w("| target | measured | verdict |")
			w("|---|---|---|")
			header = true
		}
		r.replicaTargetRows(w, run, base)
	}
	if header {
		w("")
	}
}

// replicaTargetRows are the targets of one run of several replicas.
func (r *report) replicaTargetRows(w func(string, ...any), run replicaRun, base map[int]replicaRun) {
	worst := run.failover[len(run.failover)-1]
	var old *replicaRun
	for i, x := range r.replicasBase {
		if x.n == run.n && x.replicas == run.replicas {
			old = &r.replicasBase[i]
		}
	}
	beforeFailover := ""
	if old != nil && len(old.failover) > 0 {
		beforeFailover = fmt.Sprintf("; before: %s (p50 %s, %d objects)", secs(old.failover[len(old.failover)-1]), secs(percentile(old.failover, .5)), len(old.failover))
	}
	w("| failover within 20 s (max), %d workspaces, %d replicas | %s (p50 %s, %d objects)%s | %s |", run.n, run.replicas, secs(worst), secs(percentile(run.failover, .5)), len(run.failover), beforeFailover, verdict(worst <= 20*time.Second))
	w("| failover within 15 s (max) with per-replica coordination (issue 51), %d workspaces | %s | %s |", run.n, secs(worst), verdict(worst <= 15*time.Second))
	if b, ok := base[run.n]; ok {
		beforeRSS := ""
		if old != nil && len(old.rssPeak) > 0 {
			beforeRSS = fmt.Sprintf("; before: %s (%.0f MiB)", ratio(slices.Max(old.rssPeak), slices.Max(b.rssPeak)), slices.Max(old.rssPeak))
		}
		q := slices.Max(run.rssPeak) / slices.Max(b.rssPeak)
		w("| each of %d replicas over %d shards at most 0.7x the peak RSS of one replica serving all, %d workspaces | %s (largest %.0f MiB against %.0f)%s%s | %s |", run.replicas, replicaShards, run.n, ratio(slices.Max(run.rssPeak), slices.Max(b.rssPeak)), slices.Max(run.rssPeak), slices.Max(b.rssPeak), beforeRSS, partsNote(run, b), verdict(q <= 0.7))
	}
	if len(run.steady) > 0 {
		most := 0.0
		for _, s := range run.steady {
			most = max(most, float64(s.leaseWrites())/run.window.Seconds())
		}
		w("| coordination writes at steady state at most 1 per second per replica (issue 51), %d workspaces | %.2f Lease writes per second by the busiest replica | %s |", run.n, most, verdict(most <= 1))
		r.secretReadsTarget(w, run, old)
	}
	if old != nil && len(old.steady) > 0 && len(run.steady) > 0 {
		now, then := steadyTotal(run, snapshot.total), steadyTotal(*old, snapshot.total)
		w("| no more requests at steady state with the failover's lease settings, %d replicas, %d workspaces | %.0f requests per min over the replicas (%.0f writes); before: %.0f (%.0f writes) | %s |", run.replicas, run.n,
			now, steadyTotal(run, snapshot.writes), then, steadyTotal(*old, snapshot.writes), verdict(now <= then))
	}
}

// secretReadsTarget is issue 51's bound on the access recheck: at most one Secret
// read per workspace per token renewal period, so in a window of the steady state at
// most one per workspace for each period the window starts (the first read may fall
// in it whatever its length).
func (r *report) secretReadsTarget(w func(string, ...any), run replicaRun, old *replicaRun) {
	if run.renewal <= 0 {
		return
	}
	reads := 0
	for _, s := range run.steady {
		reads += s.secretReads()
	}
	periods := int(run.window/run.renewal) + 1
	before := ""
	if old != nil && len(old.steady) > 0 {
		n := 0
		for _, s := range old.steady {
			n += s.secretReads()
		}
		before = fmt.Sprintf("; before: %d (%.2f per workspace)", n, float64(n)/float64(old.n))
	}
	w("| Secret reads at steady state at most 1 per workspace per token renewal period (issue 51), %d workspaces | %d in %s over the replicas (%.2f per workspace; tokens renewed every %s, so at most %d per workspace)%s | %s |", run.n, reads, run.window, float64(reads)/float64(run.n), run.renewal.Round(time.Second), periods, before, verdict(reads <= periods*run.n))
}

// partsNote says how the anonymous part of the replicas' peak divides, and how much of
// each peak is the executable's pages, which no division of the work can divide.
func partsNote(run, one replicaRun) string {
	if len(run.rssParts) == 0 || len(one.rssParts) == 0 {
		return ""
	}
	var anon, file float64
	for _, p := range run.rssParts {
		anon, file = max(anon, p.anonPeak), max(file, p.file)
	}
	return fmt.Sprintf("; of it anonymous memory %s (%.0f MiB against %.0f, sampled) and the executable's pages %.0f MiB in each (%.0f in one replica)",
		ratio(anon, one.rssParts[0].anonPeak), anon, one.rssParts[0].anonPeak, file, one.rssParts[0].file)
}

// steadyTotal is the requests per minute of every replica of run at steady state
// that count counts.
func steadyTotal(run replicaRun, count func(snapshot) int) float64 {
	n := 0
	for _, s := range run.steady {
		n += count(s)
	}
	return float64(n) / run.window.Minutes()
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

// renewalPeriod is the time from an access token's creation to its renewal, from the
// first granted access Secret on the platform (every grant has the same lifetime).
func (e *kcpEnv) renewalPeriod(ctx context.Context) (time.Duration, error) {
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := e.pf.List(ctx, ars); err != nil {
		return 0, err
	}
	for _, ar := range ars.Items {
		if !ar.Status.IsGranted() || ar.Status.SecretRef == nil {
			continue
		}
		sec := &corev1.Secret{}
		if err := e.pf.Get(ctx, client.ObjectKey{Namespace: ar.Namespace, Name: ar.Status.SecretRef.Name}, sec); err != nil {
			return 0, err
		}
		created, err := strconv.ParseInt(string(sec.Data[clustersv1alpha1.SecretKeyCreationTimestamp]), 10, 64)
		if err != nil {
			return 0, nil // a credential without expiry: no renewal
		}
		if at := access.RenewAt(sec.Data); !at.IsZero() {
			return at.Sub(time.Unix(created, 0)), nil
		}
		return 0, nil
	}
	return 0, nil
}
