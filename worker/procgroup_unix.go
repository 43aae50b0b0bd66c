//go:build unix

package worker

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd as the leader of a process group of its own,
// and makes its cancellation kill that whole group: whatever the command
// started (a pipeline, a background job) ends with it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killProcessGroup(cmd.Process.Pid) }
}

// killProcessGroup sends SIGKILL to the process group led by pid.
func killProcessGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
