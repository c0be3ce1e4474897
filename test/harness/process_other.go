//go:build !linux

package harness

import (
	"path/filepath"
	"syscall"
)

// sysProcAttr puts a server into its own process group. Only Linux has a
// parent-death signal; elsewhere a server outlives a test binary that is killed
// before its cleanup runs.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// envtestBinaries returns the real binaries: without a parent-death signal there is
// nothing a wrapper could add.
func envtestBinaries(assets string) (etcd, apiServer string, err error) {
	return filepath.Join(assets, "etcd"), filepath.Join(assets, "kube-apiserver"), nil
}
