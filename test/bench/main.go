package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// benchOptions are the runtime settings under test, the same for both runtimes.
type benchOptions struct {
	concurrency int
	qps         float32
	burst       int
	retry       time.Duration
	steady      time.Duration
	// standIn runs the local platform's stand-in scheduler and access-request
	// controller instead of the real openmcp-operator (the baseline of the
	// comparison); skipFloor leaves out kcp mode's floor.
	standIn, skipFloor bool
	// newcomers is how many tenants kcp mode's runtime phase binds one at a time after
	// its steady state.
	newcomers int
	// runtimeBin is the binary the runtime's processes run: this benchmark's own, or
	// for the baseline rows one built from an earlier commit (-baseline).
	runtimeBin string
	// baseline names that commit on the baseline rows; empty on this commit's.
	baseline string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == runtimeChildArg {
		if err := runtimeChildMain(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "runtime: %v\n", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "../../docs/benchmarks.md", "markdown file to write")
	sizes := flag.String("sizes", "10,100,500", "kcp mode: tenant workspace counts")
	stdSizes := flag.String("std-sizes", "", "standard mode: object counts (default: -sizes)")
	steady := flag.Duration("steady", time.Minute, "steady-state window after convergence")
	conc := flag.Int("concurrency", 8, "work-queue concurrency of both runtimes")
	qps := flag.Float64("qps", 50, "client QPS of both runtimes")
	burst := flag.Int("burst", 100, "client burst of both runtimes")
	retry := flag.Duration("retry", time.Second, "retry interval while waiting for access grants (both runtimes)")
	skipKCP := flag.Bool("skip-kcp", false, "skip kcp mode")
	skipStd := flag.Bool("skip-standard", false, "skip standard mode")
	platformSizes := flag.String("platform-sizes", "1,100", "objects per mode for the comparison of the real openmcp-operator with the stand-in scheduler; empty skips it")
	alone := flag.String("operator-alone-sizes", "", "request counts for the real openmcp-operator's own throughput with no runtime; empty skips it")
	newcomers := flag.Int("newcomers", 20, "kcp mode: tenants bound one at a time after the steady state, each timed from its object's creation to Ready")
	replicaSizes := flag.String("replica-sizes", "", "kcp mode on a kcp of two shards, served by 1 and by 2 replicas: tenant workspace counts; empty skips it")
	replicaCounts := flag.String("replica-counts", "1,2", "with -replica-sizes: the numbers of replicas measured at each size")
	baselineSizes := flag.String("baseline-replica-sizes", "", "with -replica-sizes and -baseline: the sizes whose runs are measured again with the baseline's runtime; empty: every size")
	replicaFloors := flag.Bool("replica-floors", true, "measure both floors again on the kcp of two shards before the 1-replica run (about 20 minutes at 500); false leaves the kcp section's floors as the only ones")
	fluxSizes := flag.String("flux-sizes", "", "tenant counts for the greeter example provider (standard mode, one MCP server per tenant) against Flux alone installing the same releases; empty skips it")
	baseline := flag.String("baseline", "", "a benchmark binary built from an earlier commit (make bench BENCH_BASELINE=<rev> builds it): kcp mode and the runs of several replicas are measured again with its runtime, in the same run, as the rows of the old behaviour")
	verbose := flag.Bool("v", false, "log the runtimes and the local platform")
	flag.Parse()

	assets, err := localenv.AssetsDir()
	if err != nil {
		fmt.Fprintf(os.Stderr, "test binaries missing (%v): export \"$(hack/test-binaries.sh)\" first\n", err)
		os.Exit(1)
	}
	if err := openTrace("bench"); err != nil {
		fatalf("%v", err)
	}
	// Servers of a benchmark killed before it stopped them left files behind.
	localenv.SweepStaleRunDirs()
	defer localenv.RemoveRunDir()
	if *verbose {
		log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	} else {
		log.SetLogger(logr.Discard())
	}
	ks := sizesFlag("sizes", *sizes, nil)
	ss := sizesFlag("std-sizes", *stdSizes, ks)
	opts := benchOptions{concurrency: *conc, qps: float32(*qps), burst: *burst, retry: *retry, steady: *steady, newcomers: *newcomers,
		runtimeBin: os.Args[0]}
	// The old behaviour's rows: the same phases with the baseline's runtime, on
	// fresh servers, without the floors (the size's own rows measured them).
	var base *benchOptions
	if *baseline != "" {
		b := opts
		b.runtimeBin, b.baseline, b.skipFloor, b.newcomers = *baseline, baselineName(*baseline), true, 0
		base = &b
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	rep := &report{opts: opts, started: time.Now(), cpus: runtime.NumCPU()}
	if !*skipKCP {
		for _, n := range ks {
			for _, o := range withBaseline(opts, base) {
				var r *kcpResult
				err := run(assets, fmt.Sprintf("kcp-%d%s", n, o.baseline), func(env *localenv.Env) error {
					var err error
					r, err = runKCP(ctx, env, n, o)
					return err
				})
				if err != nil {
					logf("kcp n=%d %s failed: %v", n, o.baseline, err)
					rep.failures = append(rep.failures, fmt.Sprintf("kcp mode, %d workspaces %s: %v", n, o.baseline, err))
					continue
				}
				if o.baseline != "" {
					rep.kcpBase = append(rep.kcpBase, r)
				} else {
					rep.kcp = append(rep.kcp, r)
				}
			}
		}
	}
	if !*skipStd {
		for _, n := range ss {
			pair := stdPair{n: n}
			for _, which := range []string{"this", "peer"} {
				var p phase
				err := run(assets, fmt.Sprintf("standard-%s-%d", which, n), func(env *localenv.Env) error {
					var err error
					p, err = runStandard(ctx, env, which, n, opts)
					return err
				})
				if err != nil {
					logf("standard %s n=%d failed: %v", which, n, err)
					rep.failures = append(rep.failures, fmt.Sprintf("standard mode, %s, %d objects: %v", which, n, err))
					pair.failed = true
					continue
				}
				logf("standard %s n=%d: %s", which, n, p.total.Round(time.Millisecond))
				if which == "this" {
					pair.this = p
				} else {
					pair.peer = p
				}
			}
			rep.std = append(rep.std, pair)
		}
	}
	if *platformSizes != "" {
		ps := sizesFlag("platform-sizes", *platformSizes, nil)
		rep.platform = comparePlatforms(ctx, assets, ps, opts, rep)
	}
	if *alone != "" {
		as := sizesFlag("operator-alone-sizes", *alone, nil)
		for _, n := range as {
			var r operatorAlone
			err := run(assets, fmt.Sprintf("operator-alone-%d", n), func(env *localenv.Env) error {
				var err error
				r, err = measureOperatorAlone(ctx, env, n)
				return err
			})
			if err != nil {
				logf("operator alone n=%d failed: %v", n, err)
				rep.failures = append(rep.failures, fmt.Sprintf("the operator alone, %d requests: %v", n, err))
				continue
			}
			logf("operator alone n=%d: ClusterRequests %s, AccessRequests by request %s, by cluster %s", n,
				r.clusterRequests.Round(time.Millisecond), r.byRequest.Round(time.Millisecond), r.byCluster.Round(time.Millisecond))
			rep.alone = append(rep.alone, r)
		}
	}
	if *replicaSizes != "" {
		rs := sizesFlag("replica-sizes", *replicaSizes, nil)
		counts := sizesFlag("replica-counts", *replicaCounts, nil)
		baseSizes := sizesFlag("baseline-replica-sizes", *baselineSizes, rs)
		ropts := opts
		ropts.skipFloor = !*replicaFloors
		for _, n := range rs {
			for _, replicas := range counts {
				for _, o := range withBaseline(ropts, base) {
					if o.baseline != "" && (replicas == 1 || !slices.Contains(baseSizes, n)) {
						continue // one replica's old behaviour is the kcp section's baseline row
					}
					var r replicaRun
					err := run(assets, fmt.Sprintf("replicas-%d-%d%s", n, replicas, o.baseline), func(env *localenv.Env) error {
						var err error
						r, err = runReplicas(ctx, env, n, replicas, o)
						return err
					})
					if err != nil {
						logf("replicas n=%d r=%d %s failed: %v", n, replicas, o.baseline, err)
						rep.failures = append(rep.failures, fmt.Sprintf("kcp mode, %d workspaces, %d replicas %s: %v", n, replicas, o.baseline, err))
						continue
					}
					r.baseline = o.baseline
					if o.baseline != "" {
						rep.replicasBase = append(rep.replicasBase, r)
					} else {
						rep.replicas = append(rep.replicas, r)
					}
				}
			}
		}
	}
	if *fluxSizes != "" {
		fs := sizesFlag("flux-sizes", *fluxSizes, nil)
		rep.command, rep.machine = commandLine(), machine()
		runFlux(ctx, assets, fs, opts, rep)
	}
	rep.finished = time.Now()
	if err := os.WriteFile(*out, []byte(rep.markdown()), 0o644); err != nil {
		fatalf("writing %s: %v", *out, err)
	}
	logf("wrote %s", *out)
	if len(rep.failures) > 0 {
		cancel()
		localenv.RemoveRunDir()
		os.Exit(1) //nolint:gocritic // cancel and RemoveRunDir ran just above; a failed run must exit non-zero
	}
}

// run calls fn with a fresh Env in a scratch folder, then stops what it started and
// removes its files. A failure to stop is reported, not counted: the measurement is
// done by then.
func run(assets, name string, fn func(env *localenv.Env) error) error {
	dir, err := localenv.ScratchDir(name)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := localenv.New(dir, assets)
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			logf("%s: %v", name, err)
		}
	}()
	if err := fn(env); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// commandLine is how this run was started, from test/bench, for the report.
func commandLine() string {
	args := []string{"go run ."}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " '\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// withBaseline is the options to measure a phase with: this commit's, then the
// baseline's when there is one.
func withBaseline(opts benchOptions, base *benchOptions) []benchOptions {
	if base == nil {
		return []benchOptions{opts}
	}
	return []benchOptions{opts, *base}
}

// baselineName names the baseline's rows after its binary, which
// hack/bench-baseline.sh names after the commit ("bench-<rev>").
func baselineName(bin string) string {
	return "-" + strings.TrimPrefix(filepath.Base(bin), "bench-")
}

// sizesFlag is the list of counts flag name holds, or def when it is empty and def
// is not nil; a malformed list ends the run.
func sizesFlag(name, value string, def []int) []int {
	if value == "" && def != nil {
		return def
	}
	sizes, err := parseSizes(value)
	if err != nil {
		fatalf("-%s: %v", name, err)
	}
	return sizes
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func fatalf(format string, args ...any) {
	logf(format, args...)
	os.Exit(1)
}
