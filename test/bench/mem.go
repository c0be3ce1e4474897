package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Memory is measured in this process, which runs the runtime under test and, besides
// it, the local platform and the benchmark's own watch of the objects (the API
// servers are separate processes). Before each measured phase the kernel's peak RSS
// counter is reset (clear_refs 5), so the peak is that of the phase; the baseline RSS
// before the phase is reported with it, and the difference is the closest figure to
// the runtime's own footprint. The Go heap in use after a GC at the end of the phase
// is reported too.

// resetPeakRSS resets VmHWM to the current RSS.
func resetPeakRSS() {
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// rss returns VmRSS and VmHWM in MiB.
func rss() (cur, peak float64) {
	f, err := os.Open("/proc/self/status")
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
