//go:build !linux

package storetest

import "syscall"

// galeraProcAttr puts a mariadbd in its own process group (Galera.stop
// kills it at the test's end).
func galeraProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
