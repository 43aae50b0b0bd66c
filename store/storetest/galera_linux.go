package storetest

import (
	"os"
	"syscall"
)

// galeraProcAttr puts a mariadbd in its own process group and has the kernel
// kill it when the test binary dies, even by SIGKILL or a test timeout, so no
// Galera node outlives its test.
func galeraProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills p and its process group: a mariadbd's state-transfer
// helpers (wsrep_sst_rsync and its rsync daemon) die with it, so a node
// started again finds the transfer's port and files free.
func killGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		_ = p.Signal(syscall.SIGKILL)
	}
}
