package localenv

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// pinnedThread runs functions on one goroutine locked to one OS thread. The kernel's
// parent-death signal fires when the thread that forked a child exits, not the
// process, and Go may retire threads; forking every child from a thread that lives as
// long as the Env makes the signal fire only when the starter itself ends.
type pinnedThread struct {
	calls chan func()
}

func newPinnedThread() *pinnedThread {
	p := &pinnedThread{calls: make(chan func())}
	go func() {
		runtime.LockOSThread()
		// Deliberately never unlocked: when the goroutine ends, the thread ends with
		// it, and so does anything still running that it started.
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

// Process is a child process started by an Env, leader of its own process group.
type Process struct {
	// Name is how errors call it.
	Name string
	// Log is the file holding its output.
	Log string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return isClosed(p.done) }

// Err is the process's exit error; nil while it runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// Ended says why the process ended, for messages: its exit error, or "exit status 0"
// when it ended on its own without one. Nil while it runs.
func (p *Process) Ended() error {
	if !p.Exited() {
		return nil
	}
	if p.waitErr == nil {
		return errors.New("exit status 0")
	}
	return p.waitErr
}

// Pid is the process id (and process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	return nil
}

// Stop asks the process group to terminate and kills it after grace; the error is a
// *KilledError then. Stopping an exited process does nothing.
func (p *Process) Stop(grace time.Duration) error {
	return p.StopWith(syscall.SIGTERM, grace)
}

// Kill sends SIGKILL, which no handler can catch, to the process group and waits
// until the process is gone.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s survived SIGKILL for 30s", p.Name)
	}
}

// StopWith sends sig to the process group and waits up to grace for the process to
// exit, then kills it. With no grace it kills at once (a process meant to die
// mid-work). Stopping an exited process does nothing.
func (p *Process) StopWith(sig syscall.Signal, grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	if grace <= 0 {
		return p.Kill()
	}
	if err := p.Signal(sig); err != nil {
		return err
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return &KilledError{Name: p.Name, Grace: grace}
}

// KilledError says a process did not stop within its grace period and was killed.
type KilledError struct {
	Name  string
	Grace time.Duration
}

func (e *KilledError) Error() string {
	return fmt.Sprintf("%s did not stop within %s and was killed", e.Name, e.Grace)
}

// startProcess starts cmd from the Env's pinned thread, in a new process group, with
// SIGKILL as parent-death signal and its output appended to logs/<name>.log unless
// cmd has its own.
func (e *Env) startProcess(name string, cmd *exec.Cmd) (*Process, error) {
	logFile, err := e.openLog(name)
	if err != nil {
		return nil, err
	}
	// The child has its own copy of the descriptor.
	defer logFile.Close()
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logFile
	}
	cmd.SysProcAttr = sysProcAttr()
	e.thread.do(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logFile.Name(), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
