package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

type stdPair struct {
	n          int
	this, peer phase
	failed     bool
}

type report struct {
	opts              benchOptions
	started, finished time.Time
	cpus              int
	kcp               []*kcpResult
	// kcpBase and replicasBase are the baseline's rows (-baseline): the old
	// behaviour, measured in the same run.
	kcpBase      []*kcpResult
	replicasBase []replicaRun
	std          []stdPair
	platform     []platformRow
	alone        []operatorAlone
	replicas     []replicaRun
	flux         []fluxRun
	// command and machine, for the Flux part's report.
	command, machine string
	failures         []string
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func perObj(n, total int) string {
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f", float64(total)/float64(n))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// byVerb renders request counts per object by verb.
func byVerb(s snapshot, n int) string {
	var parts []string
	for _, v := range verbs {
		if c := s.counts[v]; c != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", v, perObj(n, c)))
		}
	}
	return strings.Join(parts, ", ")
}

func perMinute(s snapshot, window time.Duration) (all, writes float64) {
	if window <= 0 {
		return 0, 0
	}
	m := window.Minutes()
	return float64(s.total()) / m, float64(s.writes()) / m
}

func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Benchmarks")
	w("")
	w("Written by `make bench` (test/bench, its own Go module) on %s, %d CPUs, in one run of %s. "+
		"These machines are noisy and the servers share the CPUs with the runtime: compare the ratios "+
		"measured side by side in the same run, not absolute times across runs.",
		r.started.UTC().Format("2006-01-02 15:04 UTC"), r.cpus, r.finished.Sub(r.started).Round(time.Second))
	w("")
	onlyFlux := len(r.flux) > 0 && len(r.kcp)+len(r.std)+len(r.platform)+len(r.alone)+len(r.replicas) == 0
	if onlyFlux {
		w("Settings of the runtime: work-queue concurrency %d, client QPS %.0f / burst %d, access retry interval %s.",
			r.opts.concurrency, r.opts.qps, r.opts.burst, r.opts.retry)
	} else {
		r.settings(w)
	}
	w("")
	if len(r.failures) > 0 {
		w("**Failures in this run:**")
		w("")
		for _, f := range r.failures {
			w("- %s", f)
		}
		w("")
	}
	if len(r.kcpBase) > 0 || len(r.replicasBase) > 0 {
		w("Rows marked **before** ran the runtime of an earlier commit (`-baseline`), on fresh servers in the same run, " +
			"without the floors ahead of it. The real operator grants faster on a platform that has not granted and released " +
			"the floors' requests first, so compare a **before** row's counts, memory and failover with this commit's; its " +
			"time to all Ready is not comparable with the floors measured before this commit's row.")
		w("")
	}
	if len(r.kcp) > 0 {
		r.kcpSection(w)
	}
	if len(r.std) > 0 {
		r.stdSection(w)
	}
	if len(r.platform) > 0 {
		r.platformSection(w)
	}
	if len(r.alone) > 0 {
		r.aloneSection(w)
	}
	r.replicaSection(w)
	if len(r.flux) > 0 {
		r.fluxSection(w)
	}
	if len(r.kcp) > 0 || len(r.std) > 0 {
		r.targets(w)
	}
	w("Tuning experiments and where the time goes: [benchmarks-tuning.md](benchmarks-tuning.md) (hand-written from runs of this command with other flags).")
	w("")
	return b.String()
}

// settings describes the runtimes' settings, the provider and how requests and
// memory are measured.
func (r *report) settings(w func(string, ...any)) {
	w("Settings of both runtimes: work-queue concurrency %d, client QPS %.0f / burst %d, access retry interval %s. "+
		"The provider is a no-op that declares a workload cluster and read access on the end-user cluster, so "+
		"every request counted is the runtime's own. Requests are counted by wrapping every transport the runtime "+
		"builds (`builder.Options.WrapTransport`). Memory: in kcp mode the runtime runs in a process of its own "+
		"(the benchmark binary run again), so its figures are the runtime's alone: peak RSS during the phase "+
		"(VmHWM reset before it), RSS before it (every workspace engaged, no object yet), and the Go heap in "+
		"use after a GC at convergence. In standard mode both runtimes run in the benchmark's process, with "+
		"the local platform and the benchmark's watch: compare them with each other.",
		r.opts.concurrency, r.opts.qps, r.opts.burst, r.opts.retry)
}

// bareFloorWrites is the floor per tenant without this project's requirements (no
// events, one role bound to the workload and the runtime, one shared platform
// namespace): the floor of the runs before 2026-11-30 20:00, still reported for
// comparison.
const bareFloorWrites = 8

func (r *report) kcpSection(w func(string, ...any)) {
	w("## kcp mode: scale across tenant workspaces")
	w("")
	w("A fresh kcp v0.30.0 (with the fix of kcp-dev/kcp#3855, docs/design/test-kcp-patch.md) per size. Setup (not measured): the workspaces are created and bind the export. " +
		"Measured: the floor, then the runtime. Every tenant creates one Widget at once; time runs from the first " +
		"creation to the last Ready (seen by a watch of the benchmark's own through the virtual workspace).")
	w("")
	w("The floor is a bare client with the same concurrency issuing, per tenant, the writes a perfect runtime "+
		"could not avoid under this project's requirements (14): through the virtual workspace the finalizer patch, "+
		"the three transition events issue 6 asks for (Accepted, WaitingForWorkloadCluster, Ready), a ServiceAccount, "+
		"two ClusterRoles and two bindings (the runtime's right to mint the workload's token, and the workload's own "+
		"rules, kept apart for least privilege), the status patch; directly one TokenRequest; on the platform the tenant's "+
		"namespace (openMCP's namespace ADR: one per tenant), the workload ClusterRequest and AccessRequest. "+
		"The bare minimum without those requirements (no events, one role bound to both subjects, one shared "+
		"platform namespace) is %d writes; runs before 2026-11-30 20:00 used it as the floor. "+
		"The floor records its events off the object's path, as the runtime's event broadcaster does, and counts an object done "+
		"when its status and its events are written. It does not wait for the local platform's grant; the runtime does. "+
		"The *floor with the platform* (measured second, on the same tenants) issues the same writes, and then, as the runtime must, "+
		"waits for the platform's grant of each tenant's AccessRequest (a watch; no worker is held while it waits), reads the access "+
		"Secret and writes Ready on one of the same workers: the pace the platform itself allows, which the runtime is measured against.", bareFloorWrites)
	w("")
	w("| workspaces | setup | floor with the platform: all done | runtime: all Ready | runtime / floor with the platform | floor: all done | runtime / floor | p50 / p99 to Ready (runtime) | p50 / p99 (floor) | requests per object (runtime) | writes per object: runtime / floor | tokens minted per workspace | startup requests | steady state: requests / writes per min | peak RSS (before) | Go heap |")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range r.kcpRows() {
		rt, fl, pf, name := k.rt, k.floor, k.pfloor, strconv.Itoa(k.n)
		if k.baseline != "" {
			// The floors are the size's, measured with this commit's row.
			if main := r.kcpOf(k.n); main != nil {
				fl, pf = main.floor, main.pfloor
			}
			name = fmt.Sprintf("%d, **before** (%s)", k.n, strings.TrimPrefix(k.baseline, "-"))
		}
		all, writes := perMinute(rt.steady, rt.window)
		w("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s (%s) | %s / %s | %s | %d | %.0f / %.0f | %.0f MiB (%.0f) | %.0f MiB |",
			name, secs(k.setup), secs(pf.total), secs(rt.total), ratio(rt.total.Seconds(), pf.total.Seconds()),
			secs(fl.total), ratio(rt.total.Seconds(), fl.total.Seconds()),
			ms(percentile(rt.lat, .5)), ms(percentile(rt.lat, .99)), ms(percentile(fl.lat, .5)), ms(percentile(fl.lat, .99)),
			perObj(k.n, rt.reqs.total()), byVerb(rt.reqs, k.n),
			perObj(k.n, rt.reqs.writes()), perObj(k.n, fl.reqs.writes()),
			perObj(k.n, rt.reqs.mintedTokens()), rt.startup.total(),
			all, writes, rt.rssPeak, rt.rssBase, rt.heap)
	}
	w("")
	r.kcpCost(w)
	w("What the runtime wrote, per object (largest size):")
	w("")
	last := r.kcp[len(r.kcp)-1]
	for _, k := range last.rt.reqs.writeKinds() {
		w("- %s: %s", k, perObj(last.n, last.rt.reqs.byResource[k]))
	}
	w("")
	if s := last.rt.steady; s.total() > 0 {
		w("Steady state (%s window, largest size): %s%s%s.", last.rt.window, byVerb(s, 1), readList(s, 1), writeList(s, 1))
		w("")
	}
}

// kcpRows are the kcp section's rows: each size, then its baseline row.
func (r *report) kcpRows() []*kcpResult {
	var rows []*kcpResult
	for _, k := range r.kcp {
		rows = append(rows, k)
		for _, b := range r.kcpBase {
			if b.n == k.n {
				rows = append(rows, b)
			}
		}
	}
	return rows
}

// kcpOf is this commit's row of size n, nil if it failed; kcpBaseOf the baseline's.
func (r *report) kcpOf(n int) *kcpResult     { return findKCP(r.kcp, n) }
func (r *report) kcpBaseOf(n int) *kcpResult { return findKCP(r.kcpBase, n) }

func findKCP(rows []*kcpResult, n int) *kcpResult {
	for _, k := range rows {
		if k.n == n {
			return k
		}
	}
	return nil
}

// kcpCost is kcp mode's cost per workspace (issue 18): the runtime's reads per object
// on the way to Ready, what a poll reconcile of a served object costs, and how soon one
// new tenant is served with every other workspace engaged.
func (r *report) kcpCost(w func(string, ...any)) {
	w("Cost per workspace. Reads are every request that is not a write (discovery included); a poll reconcile is one reconcile of kcp mode's controller in the steady-state window, counted by controller-runtime's `controller_runtime_reconcile_total` in the runtime's process (every object is polled once a minute, the ProviderConfig's default). Newcomers: after the steady state, tenants bind one at a time and each creates one object; time from its creation to Ready.")
	w("")
	w("| workspaces | requests per object: all / writes / reads | steady: poll reconciles per min | steady: requests per poll reconcile | newcomers: p50 / p99 to Ready (n) |")
	w("|---|---|---|---|---|")
	for _, k := range r.kcp {
		rt := k.rt
		reads := rt.reqs.total() - rt.reqs.writes()
		w("| %d | %s / %s / %s | %.0f | %s | %s |", k.n, perObj(k.n, rt.reqs.total()), perObj(k.n, rt.reqs.writes()), perObj(k.n, reads),
			float64(rt.steady.reconciles)/max(rt.window.Minutes(), 1e-9), perPoll(rt.steady), newcomerLatency(rt.newcomers))
	}
	w("")
	if last := r.kcp[len(r.kcp)-1]; last.rt.reqs.total() > 0 {
		w("What the runtime read, per object (largest size): %s.", strings.TrimPrefix(readList(last.rt.reqs, last.n), "; by resource: "))
		w("")
	}
}

// perPoll is requests per reconcile of a snapshot.
func perPoll(s snapshot) string {
	if s.reconciles == 0 {
		return "no reconcile"
	}
	return fmt.Sprintf("%.2f", float64(s.total())/float64(s.reconciles))
}

func newcomerLatency(lat []time.Duration) string {
	if len(lat) == 0 {
		return "not run"
	}
	return fmt.Sprintf("%s / %s (%d)", ms(percentile(lat, .5)), ms(percentile(lat, .99)), len(lat))
}

func (r *report) stdSection(w func(string, ...any)) {
	w("## Standard mode: this runtime and opencontrolplane-runtime v1.2.0")
	w("")
	w("Fresh API servers (platform, onboarding, workload, MCP) for each runtime and size; the local platform has " +
		"registered one ControlPlane per object beforehand. Both runtimes serve the same no-op provider with the same " +
		"settings; each object orders MCP access (token) and a workload cluster.")
	w("")
	w("| objects | runtime | all Ready | p50 / p99 to Ready | requests per object | writes per object | steady: requests / writes per min | peak RSS (before) | Go heap |")
	w("|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.std {
		for _, x := range []struct {
			name string
			p    phase
		}{{"this", s.this}, {"opencontrolplane-runtime", s.peer}} {
			if x.p.n == 0 {
				w("| %d | %s | failed | | | | | | |", s.n, x.name)
				continue
			}
			all, writes := perMinute(x.p.steady, x.p.window)
			w("| %d | %s | %s | %s / %s | %s (%s) | %s | %.0f / %.0f | %.0f MiB (%.0f) | %.0f MiB |",
				s.n, x.name, secs(x.p.total), ms(percentile(x.p.lat, .5)), ms(percentile(x.p.lat, .99)),
				perObj(s.n, x.p.reqs.total()), byVerb(x.p.reqs, s.n), perObj(s.n, x.p.reqs.writes()), all, writes,
				x.p.rssPeak, x.p.rssBase, x.p.heap)
		}
		if s.this.n > 0 && s.peer.n > 0 {
			w("| %d | **ratio this / peer** | %s | | %s | %s | | %s | |", s.n,
				ratio(s.this.total.Seconds(), s.peer.total.Seconds()),
				ratio(float64(s.this.reqs.total()), float64(s.peer.reqs.total())),
				ratio(float64(s.this.reqs.writes()), float64(s.peer.reqs.writes())),
				ratio(s.this.rssPeak-s.this.rssBase, s.peer.rssPeak-s.peer.rssBase))
		}
	}
	w("")
	s := r.std[len(r.std)-1]
	for _, x := range []struct {
		name string
		p    phase
	}{{"this runtime", s.this}, {"opencontrolplane-runtime", s.peer}} {
		if x.p.n == 0 {
			continue
		}
		var parts []string
		for _, k := range x.p.reqs.writeKinds() {
			parts = append(parts, fmt.Sprintf("%s %s", k, perObj(s.n, x.p.reqs.byResource[k])))
		}
		w("Writes per object, %s (%d objects): %s.", x.name, s.n, strings.Join(parts, ", "))
		w("")
		if x.p.steady.total() > 0 {
			w("Steady state, %s (%s window): %s%s%s.", x.name, x.p.window, byVerb(x.p.steady, 1), readList(x.p.steady, 1), writeList(x.p.steady, 1))
			w("")
		}
	}
}

func (r *report) targets(w func(string, ...any)) {
	w("## Targets (issues 9, 18 and 36)")
	w("")
	w("| target | measured | verdict |")
	w("|---|---|---|")
	if len(r.kcp) > 0 {
		k := r.kcp[len(r.kcp)-1]
		rt, fl := k.rt, k.floor
		q := rt.total.Seconds() / fl.total.Seconds()
		w("| %d workspaces bound to Ready within 1.5x the floor | %s | %s |", k.n, ratio(rt.total.Seconds(), fl.total.Seconds()), verdict(q <= 1.5))
		extra := float64(rt.reqs.writes()-fl.reqs.writes()) / float64(k.n)
		w("| at most 1 write per object beyond the floor | %.1f beyond (%s vs %s; %.1f beyond the bare minimum of %d) | %s |", extra, perObj(k.n, rt.reqs.writes()), perObj(k.n, fl.reqs.writes()), float64(rt.reqs.writes())/float64(k.n)-bareFloorWrites, bareFloorWrites, verdict(extra <= 1))
		_, writes := perMinute(rt.steady, rt.window)
		w("| zero writes per minute at steady state | %.1f writes/min (%s window) | %s |", writes, rt.window, verdict(rt.steady.writes() == 0))
		// Tokens minted: a TokenRequest refused while a new binding reached kcp's
		// authorizer minted nothing, and is retried (counted among the requests).
		trs := float64(rt.reqs.mintedTokens()) / float64(k.n)
		w("| no TokenRequest outside renewals | %.2f minted per workspace at first serve (%d more refused once while a new binding reached the authorizer, and retried), %d in steady state | %s |",
			trs, rt.reqs.refusedTokens, rt.steady.counts["tokenrequest"], verdict(trs <= 1 && rt.steady.counts["tokenrequest"] == 0))
		w("| runtime RSS at most 150 MiB at %d workspaces | peak %.0f MiB (the runtime's process; %.0f MiB with every workspace engaged, before the objects) | %s |", k.n, rt.rssPeak, rt.rssBase, verdict(rt.rssPeak <= 150))
		if len(r.kcp) > 1 {
			a, z := r.kcp[0], r.kcp[len(r.kcp)-1]
			dn := float64(z.n - a.n)
			perWS := (z.rt.rssBase - a.rt.rssBase) / dn
			perObj := (z.rt.rssPeak - z.rt.rssBase - (a.rt.rssPeak - a.rt.rssBase)) / dn
			w("| RSS grows with objects, not workspaces | %.3f MiB per engaged workspace (RSS before the objects), %.3f MiB per object (peak minus that), %d→%d | %s |",
				perWS, perObj, a.n, z.n, verdict(perWS <= perObj))
		}
	}
	if len(r.kcp) > 0 {
		// Issue 18's cost targets, at the largest size.
		k := r.kcp[len(r.kcp)-1]
		rt, fl := k.rt, k.floor
		q := rt.total.Seconds() / fl.total.Seconds()
		w("| (issue 18) %d workspaces all Ready within 1.2x the floor | %s | %s |", k.n, ratio(rt.total.Seconds(), fl.total.Seconds()), verdict(q <= 1.2))
		perObject := float64(rt.reqs.total()) / float64(k.n)
		w("| (issue 18) at most 16 requests per object | %.1f (%s writes, %s reads) | %s |", perObject, perObj(k.n, rt.reqs.writes()), perObj(k.n, rt.reqs.total()-rt.reqs.writes()), verdict(perObject <= 16))
		pp := float64(rt.steady.total()) / float64(max(rt.steady.reconciles, 1))
		w("| (issue 18) steady state: 0 writes, at most 1 request per poll reconcile | %d writes, %s requests per poll reconcile (%d reconciles) | %s |",
			rt.steady.writes(), perPoll(rt.steady), rt.steady.reconciles, verdict(rt.steady.writes() == 0 && rt.steady.reconciles > 0 && pp <= 1))
		if len(rt.newcomers) > 0 {
			p99 := percentile(rt.newcomers, .99)
			w("| (issue 18) one new tenant's object Ready within 1.5 s (p99 of %d, one at a time, %d engaged) | %s | %s |", len(rt.newcomers), k.n, ms(p99), verdict(p99 <= 1500*time.Millisecond))
		}
		before := func(f func(*kcpResult) string) string {
			if b := r.kcpBaseOf(k.n); b != nil {
				return "; before: " + f(b)
			}
			return ""
		}
		if pf := k.pfloor.total; pf > 0 {
			q := rt.total.Seconds() / pf.Seconds()
			w("| (issue 36) %d workspaces all Ready within 1.15x the floor with the platform | %s (%s against %s)%s | %s |", k.n, ratio(rt.total.Seconds(), pf.Seconds()), secs(rt.total), secs(pf),
				before(func(b *kcpResult) string { return ratio(b.rt.total.Seconds(), pf.Seconds()) }), verdict(q <= 1.15))
		}
		// Two decimals: a fixed few requests of the phase (watch renewals, the
		// supervisor's resync) must not round away.
		w("| (issue 36) at most 16 requests per object | %.2f (%d requests for %d objects)%s | %s |", perObject, rt.reqs.total(), k.n,
			before(func(b *kcpResult) string { return fmt.Sprintf("%.2f", float64(b.rt.reqs.total())/float64(b.n)) }), verdict(perObject <= 16))
		w("| (issue 36) peak RSS at most 150 MiB at %d workspaces | %.0f MiB (live Go heap after GC %.0f MiB)%s | %s |", k.n, rt.rssPeak, rt.heap,
			before(func(b *kcpResult) string { return fmt.Sprintf("%.0f MiB (heap %.0f MiB)", b.rt.rssPeak, b.rt.heap) }), verdict(rt.rssPeak <= 150))
	}
	// The largest size both runtimes finished.
	for i := len(r.std) - 1; i >= 0; i-- {
		if s := r.std[i]; s.this.n > 0 && s.peer.n > 0 {
			speed := s.peer.total.Seconds() / s.this.total.Seconds()
			w("| standard mode at least 1.5x as fast as opencontrolplane-runtime (%d objects) | %.2fx as fast | %s |", s.n, speed, verdict(speed >= 1.5))
			rq := float64(s.this.reqs.total()) / float64(s.peer.reqs.total())
			w("| standard mode at most 0.7x its requests per object | %.2fx | %s |", rq, verdict(rq <= 0.7))
			break
		}
	}
	w("")
}

// writeList names the writes of a snapshot, if any, divided by n.
func writeList(s snapshot, n int) string { return kindList("; writes: ", s.writeKinds(), s, n) }

// readList is like writeList for the requests that are not writes.
func readList(s snapshot, n int) string { return kindList("; by resource: ", s.readKinds(), s, n) }

// kindList lists kinds ("verb resource") with their counts divided by n, after prefix;
// empty when there are none. A count too small to show per object is given in all too:
// start-up reads and watch restarts are what separate 16.0 from 16.04 per object.
func kindList(prefix string, kinds []string, s snapshot, n int) string {
	var parts []string
	for _, k := range kinds {
		c := s.byResource[k]
		part := fmt.Sprintf("%s %s", k, perObj(n, c))
		if n > 1 && c > 0 && float64(c)/float64(n) < 0.05 {
			part += fmt.Sprintf(" (%d in all)", c)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return ""
	}
	return prefix + strings.Join(parts, ", ")
}
