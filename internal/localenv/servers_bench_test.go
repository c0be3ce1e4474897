package localenv

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkServerCPU measures what one server costs the machine's cores, the resource
// the e2e packages share: the CPU time of its processes from start to ready and stop
// (cpu-s/start), and of an idle while in between (idle-cpu-s/min, from KSP_BENCH_IDLE,
// default 30s, scaled to a minute). It counts the processes the Env started and waited
// for, so another process's CPU is not in the figures; contention still inflates them
// (with a build beside it the idle figure read 1.6x the idle machine's), so compare
// runs on an otherwise idle machine. Wall time is reported as wall-s/start.
//
//	go test -run '^$' -bench BenchmarkServerCPU -benchtime 3x ./internal/localenv/
func BenchmarkServerCPU(b *testing.B) {
	idle := 30 * time.Second
	if v := os.Getenv("KSP_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("KSP_BENCH_IDLE: %v", err)
		}
		idle = d
	}
	crds, err := OpenMCPCRDs(PurposePlatform)
	if err != nil {
		b.Fatal(err)
	}
	servers := []struct {
		name  string
		start func(*Env) error
	}{
		// Since 2026-12-07 with kube-controller-manager (StartAPIServer starts it).
		{"kube-apiserver", func(e *Env) error {
			_, err := e.StartAPIServer("platform", crds)
			return err
		}},
		// A workload or MCP cluster: besides, kube-scheduler and KWOK with one node.
		{"kube-apiserver+node", func(e *Env) error {
			s, err := e.StartAPIServer("workload", nil)
			if err == nil {
				_, err = e.StartSimulatedNodes(context.Background(), s, 1)
			}
			return err
		}},
		{"kcp", func(e *Env) error {
			_, err := e.StartKCP(context.Background(), KCPOptions{})
			return err
		}},
	}
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			var startCPU, idleCPU, wall time.Duration
			for i := 0; b.Loop(); i++ {
				env := newTestEnv(b, "bench-"+s.name+"-"+strconv.Itoa(i))
				began, cpu0 := time.Now(), childrenCPU(b)
				if err := s.start(env); err != nil {
					b.Fatal(err)
				}
				ready := time.Since(began)
				// The idle while is measured on a second server of the same kind,
				// stopped after it, so that both figures are whole processes' times.
				if err := env.Stop(); err != nil {
					b.Fatal(err)
				}
				startCPU += childrenCPU(b) - cpu0
				wall += ready

				idleEnv := newTestEnv(b, "bench-"+s.name+"-idle-"+strconv.Itoa(i))
				cpu1 := childrenCPU(b)
				if err := s.start(idleEnv); err != nil {
					b.Fatal(err)
				}
				time.Sleep(idle) // the quantity measured: a running server's idle cost
				if err := idleEnv.Stop(); err != nil {
					b.Fatal(err)
				}
				idleCPU += childrenCPU(b) - cpu1
			}
			n := float64(b.N)
			b.ReportMetric(startCPU.Seconds()/n, "cpu-s/start")
			b.ReportMetric((idleCPU-startCPU).Seconds()/n*float64(time.Minute)/float64(idle), "idle-cpu-s/min")
			b.ReportMetric(wall.Seconds()/n, "wall-s/start")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// childrenCPU is the user and system time of the processes this one has started and
// waited for.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
