package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// sysProcAttr puts a server into its own process group (so stop reaches everything
// it runs, and a Ctrl-C in the terminal reaches only the test binary, which then
// stops the servers) and has the kernel kill it when the thread that started it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// errNoSetpriv says why envtest servers cannot be started safely.
var errNoSetpriv = errors.New("setpriv (util-linux) not found in PATH; it makes etcd and kube-apiserver die with the test binary")

var (
	wrappersOnce sync.Once
	wrappersDir  string
	wrappersErr  error
)

// envtestBinaries returns the paths envtest should start for etcd and kube-apiserver.
//
// envtest starts both itself, with Setpgid but without a parent-death signal, so a
// test binary killed by a timeout would leave them running. Instead of the real
// binaries it gets two wrapper scripts that exec setpriv(1), which sets the signal and
// then execs the real binary: the process id stays the same, so envtest's own stop
// (a signal to the process group) keeps working.
func envtestBinaries(assets string) (etcd, apiServer string, err error) {
	wrappersOnce.Do(func() {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			wrappersErr = errNoSetpriv
			return
		}
		base, err := runDir()
		if err != nil {
			wrappersErr = err
			return
		}
		dir := filepath.Join(base, "bin")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			wrappersErr = fmt.Errorf("creating wrapper folder: %w", err)
			return
		}
		for _, name := range []string{"etcd", "kube-apiserver"} {
			script := "#!/bin/sh\n" +
				"# Written by the test harness: the server dies with the test binary.\n" +
				"exec " + shellQuote(setpriv) + " --pdeathsig KILL -- " +
				shellQuote(filepath.Join(assets, name)) + " \"$@\"\n"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700); err != nil {
				wrappersErr = fmt.Errorf("writing wrapper for %s: %w", name, err)
				return
			}
		}
		wrappersDir = dir
	})
	if wrappersErr != nil {
		return "", "", wrappersErr
	}
	return filepath.Join(wrappersDir, "etcd"), filepath.Join(wrappersDir, "kube-apiserver"), nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
