package harness

import (
	"io"
	"strings"
	"sync"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogTo sends controller-runtime's global logger (the runtime's, the local platform's)
// to w until the test ends, then no more: writing to a finished test panics.
// controller-runtime honours only the first SetLogger of a process, so the harness sets
// the logger once and writes to the targets of the tests running. Tests in parallel
// each receive every line, theirs and the others'.
func LogTo(t testing.TB, w io.Writer) {
	logOnce.Do(func() { ctrllog.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(logTargets))) })
	id := logTargets.add(w)
	t.Cleanup(func() { logTargets.remove(id) })
}

// LogToTest is LogTo with the test's own log as the target.
func LogToTest(t testing.TB) { LogTo(t, TestWriter{T: t}) }

// TestWriter writes each write as one line of the test's log.
type TestWriter struct{ T testing.TB }

func (w TestWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var (
	logTargets = &fanOut{targets: map[int]io.Writer{}}
	logOnce    sync.Once
)

// fanOut writes to the targets added and not yet removed, or discards.
type fanOut struct {
	mu      sync.Mutex
	next    int
	targets map[int]io.Writer
}

func (f *fanOut) add(w io.Writer) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.targets[f.next] = w
	return f.next
}

func (f *fanOut) remove(id int) {
	f.mu.Lock()
	delete(f.targets, id)
	f.mu.Unlock()
}

func (f *fanOut) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.targets {
		_, _ = w.Write(p)
	}
	return len(p), nil
}
