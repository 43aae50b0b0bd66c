//go:build !linux

package storetest

import (
	"os"
	"syscall"
)

// galeraProcAttr puts a mariadbd in its own process group (Galera.stop
// kills it at the test's end).
func galeraProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills p (its helpers are left to the platform).
func killGroup(p *os.Process) { _ = p.Signal(syscall.SIGKILL) }
