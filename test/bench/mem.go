package main

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is measured per process from /proc. In kcp mode the runtime runs in a process
// of its own (child.go), so its figures are the runtime's alone. In standard mode both
// runtimes run in this process, which also holds the local platform and the
// benchmark's own watch (the API servers are separate processes): the baseline RSS
// before the phase is reported with the peak, and the two runtimes are compared on the
// same footing. Before each measured phase the kernel's peak RSS counter is reset
// (clear_refs 5), so the peak is that of the phase. The Go heap in use after a GC at
// the end of the phase is reported too.

// self names this process for rss and resetPeakRSS.
const self = "self"

// resetPeakRSS resets VmHWM of process pid to its current RSS. For this process it
// first returns freed memory to the OS: the kcp sizes before standard mode leave
// hundreds of MiB freed but not yet returned, which would count as the baseline.
func resetPeakRSS(pid string) {
	if pid == self {
		debug.FreeOSMemory()
	}
	_ = os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0)
}

// rss returns VmRSS and VmHWM of process pid in MiB.
func rss(pid string) (cur, peak float64) {
	st := procStatus(pid)
	return st["VmRSS"], st["VmHWM"]
}

// procStatus reads the memory lines of /proc/<pid>/status, in MiB by name: VmRSS,
// VmHWM, RssAnon (the heap, stacks and other memory of the process's own), RssFile
// (pages of mapped files, nearly all of them the executable's own code and tables).
func procStatus(pid string) map[string]float64 {
	st := map[string]float64{}
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return st
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[0], 64)
		st[k] = kb / 1024
	}
	return st
}

// rssParts is what a process's peak RSS is made of. The kernel keeps a peak of the
// total only (VmHWM), so the anonymous part's peak is sampled.
type rssParts struct {
	// anonPeak is the largest RssAnon sampled during the phase.
	anonPeak float64
	// file is RssFile at the end of the phase: file-backed pages, nearly all of them the
	// executable's that were read (its code, function tables and read-only data; the C
	// library is about 1 MiB when the binary links it), which do not grow with the
	// workspaces served and are the same in every replica.
	file float64
}

// sampleRSSParts samples RssAnon of each process every interval until the returned
// function is called (once or more), which returns each process's parts in the order
// of pids. The anonymous memory rises and falls with the garbage collector's cycles,
// which are seconds apart in the runtime (GODEBUG=gctrace=1), so a sample every half
// second misses little of its peak.
func sampleRSSParts(pids []string, interval time.Duration) func() []rssParts {
	parts := make([]rssParts, len(pids))
	sample := func() {
		for i, pid := range pids {
			st := procStatus(pid)
			parts[i].anonPeak = max(parts[i].anonPeak, st["RssAnon"])
			parts[i].file = st["RssFile"]
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return sync.OnceValue(func() []rssParts {
		close(stop)
		<-done // the sampler has stopped: parts is the caller's again
		sample()
		return parts
	})
}

// heapMiB is the Go heap in use after a GC.
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}
