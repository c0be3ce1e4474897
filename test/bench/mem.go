package main

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
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
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[0], 64)
		switch k {
		case "VmRSS":
			cur = kb / 1024
		case "VmHWM":
			peak = kb / 1024
		}
	}
	return cur, peak
}

// heapMiB is the Go heap in use after a GC.
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}
