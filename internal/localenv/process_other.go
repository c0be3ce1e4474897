//go:build !linux

package localenv

import (
	"path/filepath"
	"syscall"
)

// sysProcAttr puts a process into its own process group. Only Linux has a
// parent-death signal; elsewhere a process outlives a starter killed before it
// stopped it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// envtestBinaries returns the real binaries: without a parent-death signal there is
// nothing a wrapper could add.
func (e *Env) envtestBinaries() (etcd, apiServer string, err error) {
	return filepath.Join(e.Assets, "etcd"), filepath.Join(e.Assets, "kube-apiserver"), nil
}
