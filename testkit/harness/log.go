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
// to w until the test ends, then nowhere: writing to a finished test panics.
// controller-runtime honours only the first SetLogger of a process, so the harness sets
// the logger once and switches its target per test.
func LogTo(t testing.TB, w io.Writer) {
	logOnce.Do(func() { ctrllog.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(logTarget))) })
	logTarget.set(w)
	t.Cleanup(func() { logTarget.set(nil) })
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
	logTarget = &switchWriter{}
	logOnce   sync.Once
)

// switchWriter writes to a target that can be replaced, or discards.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}
