package localenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// pinnedThread runs functions on one goroutine locked to one OS thread. The kernel's
// parent-death signal fires when the thread that forked a child exits, and Go may
// retire threads; forking every child from a thread that lives as long as the Env
// makes the signal fire only when the command itself ends.
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

func (p *pinnedThread) do(f func()) {
	done := make(chan struct{})
	p.calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

func (p *pinnedThread) close() { close(p.calls) }

// Process is a child process started by an Env, leader of its own process group.
type Process struct {
	// Name is how progress messages and errors call it.
	Name string
	// Log is the file holding its output.
	Log string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit error; valid once Done is closed.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
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

// Stop asks the process group to terminate and kills it after grace. Stopping an
// exited process does nothing.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return fmt.Errorf("%s did not stop within %s and was killed", p.Name, grace)
}

// startProcess starts cmd from the Env's pinned thread, in a new process group, with
// SIGKILL as parent-death signal and its output appended to logPath.
func (e *Env) startProcess(name, logPath string, cmd *exec.Cmd) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	// The child has its own copy of the descriptor.
	defer logFile.Close()
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	if cmd.Stderr == nil {
		cmd.Stderr = logFile
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	e.thread.do(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}
