package harness

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// pinnedThread runs functions on one goroutine locked to one OS thread.
//
// The kernel's parent-death signal (Pdeathsig, set by sysProcAttr on Linux) fires
// when the *thread* that forked a child exits, not the process. Go may retire idle
// threads of goroutines that locked and exited, so a server forked from an arbitrary
// goroutine could be killed in the middle of a test. Forking every server from a
// pinned thread that lives as long as the server avoids that. When the pinned
// goroutine ends it exits still locked, which makes the runtime terminate the thread:
// anything it started that is somehow still running then gets SIGKILL from the kernel.
type pinnedThread struct {
	calls chan func()
}

func newPinnedThread() *pinnedThread {
	p := &pinnedThread{calls: make(chan func())}
	go func() {
		runtime.LockOSThread()
		// Deliberately never unlocked, see the type's comment.
		for f := range p.calls {
			f()
		}
	}()
	return p
}

// do runs f on the pinned thread and waits for it to return.
func (p *pinnedThread) do(f func()) {
	done := make(chan struct{})
	p.calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

// close ends the pinned goroutine and with it the thread. Call it only once the
// processes started on it have stopped.
func (p *pinnedThread) close() { close(p.calls) }

// process is one server process started by the harness, in its own process group.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	waitErr error         // valid after done is closed
}

// startProcess starts cmd on the pinned thread, in a new process group and (on Linux)
// with SIGKILL as parent-death signal.
func startProcess(thread *pinnedThread, cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = sysProcAttr()
	var err error
	thread.do(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process group to terminate and kills it after grace.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	pgid := p.cmd.Process.Pid // Setpgid makes the server the leader of its group
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("terminating process group %d: %w", pgid, err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing process group %d: %w", pgid, err)
	}
	<-p.done
	return fmt.Errorf("process group %d %w", pgid, &killedError{grace: grace})
}

// killedError says a process did not stop within its grace period and was killed.
type killedError struct{ grace time.Duration }

func (e *killedError) Error() string {
	return fmt.Sprintf("did not stop within %s and was killed", e.grace)
}
