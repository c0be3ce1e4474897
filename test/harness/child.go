package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Child is a process the test started and may kill without warning, for example the
// runtime run as a copy of the test binary (see StartTestChild). Unlike the servers it
// is meant to die mid-work: Kill sends SIGKILL, which no handler can catch.
type Child struct {
	Name    string
	LogPath string
	thread  *pinnedThread
	proc    *process
}

// StartTestChild runs this test binary again with only the test named test, the
// environment of the parent plus env, and its output in a log file. The child dies with
// the test binary (parent-death signal), and Kill or the end of the test kills it.
func StartTestChild(t testing.TB, test string, env ...string) *Child {
	t.Helper()
	return StartChild(t, test, []string{"-test.run=^" + test + "$", "-test.v", "-test.timeout=0"}, env...)
}

// StartChild runs this binary again with args, the environment of the parent plus env,
// and its output in a log file; it is StartTestChild for binaries that are not tests
// (the benchmark runs the runtime under test in a process of its own this way).
func StartChild(t testing.TB, name string, args []string, env ...string) *Child {
	t.Helper()
	dir := scratchDir(t, "child")
	c := &Child{Name: name, LogPath: filepath.Join(dir, "output.log"), thread: newPinnedThread()}
	logFile := createLog(t, c.LogPath)
	defer logFile.Close()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p, err := startProcess(c.thread, cmd)
	if err != nil {
		c.thread.close()
		t.Fatalf("harness: %v", err)
	}
	c.proc = p
	t.Cleanup(func() {
		c.Kill(t)
		if t.Failed() {
			logTail(t, "child "+name, c.LogPath)
		}
		_ = os.RemoveAll(dir)
	})
	return c
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.proc.cmd.Process.Pid }

// Kill sends SIGKILL to the child's process group and waits until it is gone. Killing
// twice does nothing.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if c.proc.exited() {
		return
	}
	if err := syscall.Kill(-c.Pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("harness: killing %s: %v", c.Name, err)
	}
	select {
	case <-c.proc.done:
	case <-time.After(30 * time.Second):
		t.Errorf("harness: %s survived SIGKILL for 30s", c.Name)
		return
	}
	c.thread.close()
}

// Failed returns why the child ended early, or nil while it runs.
func (c *Child) Failed() error {
	if !c.proc.exited() {
		return nil
	}
	return fmt.Errorf("%s exited: %v (log %s)", c.Name, c.proc.waitErr, c.LogPath)
}
