package storetest

import "syscall"

// galeraProcAttr puts a mariadbd in its own process group and has the kernel
// kill it when the test binary dies, even by SIGKILL or a test timeout, so no
// Galera node outlives its test.
func galeraProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
