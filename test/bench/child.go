package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
	"github.com/openmcp-project/kcp-serviceprovider/builder"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// runtimeChildArg, as the first argument, makes the benchmark binary the runtime under
// test in kcp mode. The benchmark runs it as a process of its own, so that the memory
// measured is the runtime's alone: in the benchmark's process, the local platform, the
// benchmark's watch and what setting up 500 workspaces left behind were 279 MiB of a
// 378 MiB peak.
const runtimeChildArg = "runtime-child"

// snapshotJSON is a snapshot on the wire between the runtime's process and the
// benchmark.
type snapshotJSON struct {
	Counts     map[string]int `json:"counts"`
	ByResource map[string]int `json:"byResource"`
	Reconciles int            `json:"reconciles"`
	// RefusedTokens: snapshot.refusedTokens.
	RefusedTokens int `json:"refusedTokens"`
}

// runtimeChildMain is the runtime's process: the same builder call as a provider's
// main, its requests counted, and an HTTP endpoint on loopback answering the benchmark:
// /counts (the request counts so far), /active (200 once kcp mode serves), /metric?name=
// (a gauge of the runtime's) and /heap (Go heap in use after a GC, MiB).
func runtimeChildMain(args []string) error {
	fs := flag.NewFlagSet(runtimeChildArg, flag.ContinueOnError)
	kubeconfig := fs.String("platform-kubeconfig", "", "kubeconfig file of the platform cluster")
	addrFile := fs.String("addr-file", "", "file to write the endpoint's address to")
	conc := fs.Int("concurrency", 8, "work-queue concurrency")
	qps := fs.Float64("qps", 50, "client QPS")
	burst := fs.Int("burst", 100, "client burst")
	retry := fs.Duration("retry", time.Second, "access retry interval")
	replica := fs.String("replica", "", "the replica's identity; with it, kcp mode shares the workspaces with the other replicas (--leader-elect)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The runtime's logs cost CPU the measurement would carry; failures show in the
	// benchmark's figures and in this process's exit status.
	log.SetLogger(logr.Discard())
	name := *replica
	if name == "" {
		name = "runtime"
	}
	if err := openTrace(name); err != nil {
		return err
	}
	raw, err := os.ReadFile(*kubeconfig)
	if err != nil {
		return err
	}
	platform, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return fmt.Errorf("platform kubeconfig does not parse")
	}
	widgetCRD, _, err := widget.CRDs()
	if err != nil {
		return err
	}
	rt, err := kcpRuntime(apiexport.FromCRD(providerName, widgetCRD))
	if err != nil {
		return err
	}
	cnt := newCounter()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/counts", func(w http.ResponseWriter, _ *http.Request) {
		s := cnt.snapshot()
		_ = json.NewEncoder(w).Encode(snapshotJSON{Counts: s.counts, ByResource: s.byResource, Reconciles: serviceReconciles(), RefusedTokens: s.refusedTokens})
	})
	mux.HandleFunc("/active", func(w http.ResponseWriter, _ *http.Request) {
		if !rt.KCPActive() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	// Profiles of the runtime under test, to see where its time and memory go:
	// go tool pprof http://<addr>/debug/pprof/heap (the address is in -addr-file).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/metric", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%d", gauge(r.URL.Query().Get("name")))
	})
	mux.HandleFunc("/heap", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "%f", heapMiB())
	})
	go func() { _ = http.Serve(ln, mux) }()
	tmp := *addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, *addrFile); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	return rt.Start(ctx, builder.Options{
		Platform: platform, Namespace: "default", RetryInterval: *retry,
		MaxConcurrentReconciles: *conc, ClientQPS: float32(*qps), ClientBurst: *burst,
		WrapTransport: cnt.wrap,
		// Several replicas as the operator runs them: --leader-elect with the default
		// lease timings.
		LeaderElection: *replica != "", Replica: *replica,
	})
}

// runtimeProcess is the benchmark's handle on the runtime's process.
type runtimeProcess struct {
	child *localenv.Process
	url   string
	hc    *http.Client
}

// startRuntimeProcess starts the runtime in its own process against the platform
// cluster of platformKubeconfig and waits until its endpoint answers.
func startRuntimeProcess(ctx context.Context, env *localenv.Env, name string, platformKubeconfig []byte, opts benchOptions, replica bool) (*runtimeProcess, error) {
	kc, err := env.WriteFile(name+"/platform.kubeconfig", platformKubeconfig)
	if err != nil {
		return nil, err
	}
	addrFile := filepath.Join(env.Dir, name, "addr")
	args := []string{runtimeChildArg,
		"-platform-kubeconfig", kc, "-addr-file", addrFile,
		"-concurrency", strconv.Itoa(opts.concurrency), "-qps", fmt.Sprint(opts.qps),
		"-burst", strconv.Itoa(opts.burst), "-retry", opts.retry.String()}
	if replica {
		args = append(args, "-replica", name)
	}
	child, err := env.StartProcess(name, cmp.Or(opts.runtimeBin, os.Args[0]), args, nil, 30*time.Second)
	if err != nil {
		return nil, err
	}
	p := &runtimeProcess{child: child, hc: &http.Client{Timeout: 10 * time.Second}}
	err = localenv.Poll(ctx, time.Minute, "runtime process endpoint", func(context.Context) error {
		if err := p.failed(); err != nil {
			return err
		}
		addr, err := os.ReadFile(addrFile)
		if err != nil {
			return err
		}
		p.url = "http://" + string(addr)
		return nil
	})
	return p, err
}

// failed says why the runtime's process ended, or nil while it runs.
func (p *runtimeProcess) failed() error {
	if !p.child.Exited() {
		return nil
	}
	return fmt.Errorf("the runtime exited: %w\n%s", p.child.Ended(), localenv.LogTail(p.child.Log, 20))
}

func (p *runtimeProcess) get(path string) (*http.Response, error) {
	if err := p.failed(); err != nil {
		return nil, err
	}
	return p.hc.Get(p.url + path)
}

// snapshot reads the runtime's request counts.
func (p *runtimeProcess) snapshot() (snapshot, error) {
	resp, err := p.get("/counts")
	if err != nil {
		return snapshot{}, err
	}
	defer resp.Body.Close()
	var s snapshotJSON
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return snapshot{}, err
	}
	return snapshot{counts: s.Counts, byResource: s.ByResource, reconciles: s.Reconciles, refusedTokens: s.RefusedTokens}, nil
}

// active reports whether kcp mode serves.
func (p *runtimeProcess) active() error {
	resp, err := p.get("/active")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("kcp mode not active yet")
	}
	return nil
}

// heap is the runtime's Go heap in use after a GC, MiB.
func (p *runtimeProcess) heap() float64 {
	resp, err := p.get("/heap")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var v float64
	_, _ = fmt.Fscan(resp.Body, &v)
	return v
}

// saveProfiles writes the runtime's heap (after a GC) and goroutine profiles to
// $KSP_BENCH_PROFILES/<name>-{heap,goroutine}.pprof when that variable names a
// directory, for reading with `go tool pprof` where the memory goes.
func (p *runtimeProcess) saveProfiles(name string) {
	dir := os.Getenv("KSP_BENCH_PROFILES")
	if dir == "" {
		return
	}
	for kind, path := range map[string]string{"heap": "/debug/pprof/heap?gc=1", "goroutine": "/debug/pprof/goroutine"} {
		resp, err := p.get(path)
		if err != nil {
			logf("  %s profile %s: %v", kind, name, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+"-"+kind+".pprof"), b, 0o600)
		}
		if err != nil {
			logf("  %s profile %s: %v", kind, name, err)
		}
	}
}

// pid names the process for rss and resetPeakRSS.
func (p *runtimeProcess) pid() string { return strconv.Itoa(p.child.Pid()) }

// owned is how many workspaces the runtime serves.
func (p *runtimeProcess) owned() int { return p.metric("serviceprovider_kcp_workspaces_owned") }

// metric is the value of the runtime's gauge name; -1 when unreadable.
func (p *runtimeProcess) metric(name string) int {
	resp, err := p.get("/metric?name=" + name)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	v := -1
	_, _ = fmt.Fscan(resp.Body, &v)
	return v
}

// gauge is the sum of the runtime's own metric name.
func gauge(name string) int {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetGauge().GetValue()
			}
		}
	}
	return int(n)
}

// serviceReconciles is how many reconciles of Widgets kcp mode's controller has run,
// from controller-runtime's own metric (controller_runtime_reconcile_total).
func serviceReconciles() int {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == providerName+"-kcp" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}
