//go:build !linux

package e2ekcp

import "syscall"

// replicaSysProcAttr: outside Linux a replica of a crashed test is not reaped.
func replicaSysProcAttr() *syscall.SysProcAttr { return nil }
