package e2ekcp

import "syscall"

// replicaSysProcAttr kills a replica when the test process dies, so that no replica
// outlives a crashed test.
func replicaSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
