package localenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// sysProcAttr puts a process into its own process group and has the kernel kill it
// when the thread that started it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// errNoSetpriv says why envtest servers cannot be tied to their starter's lifetime.
var errNoSetpriv = errors.New("setpriv (util-linux) not found in PATH; it makes etcd and kube-apiserver die with their starter")

// envtestBinaries returns the paths envtest should start for etcd and kube-apiserver.
// envtest starts both itself, with Setpgid but without a parent-death signal; instead
// of the real binaries it gets small scripts that exec setpriv(1), which sets the
// signal and then execs the real binary, keeping the process id (so envtest's own
// stop, a signal to the process group, still works).
func (e *Env) envtestBinaries() (etcd, apiServer string, err error) {
	dir := filepath.Join(e.Dir, "wrappers")
	etcd, apiServer = filepath.Join(dir, "etcd"), filepath.Join(dir, "kube-apiserver")
	if _, err := os.Stat(apiServer); err == nil {
		return etcd, apiServer, nil
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", "", errNoSetpriv
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("creating wrapper folder: %w", err)
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		script := "#!/bin/sh\n" +
			"# Written by kcp-serviceprovider's localenv: the server dies with its starter.\n" +
			"exec " + shellQuote(setpriv) + " --pdeathsig KILL -- " +
			shellQuote(filepath.Join(e.Assets, name)) + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700); err != nil {
			return "", "", fmt.Errorf("writing wrapper for %s: %w", name, err)
		}
	}
	return etcd, apiServer, nil
}
