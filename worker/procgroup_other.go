//go:build !unix

package worker

import (
	"os"
	"os/exec"
)

// ownProcessGroup does nothing where there are no process groups (Windows):
// a cancelled command is killed alone, and what it started may outlive it.
// Shell tasks belong on Unix workers; this keeps the binary building.
func ownProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the process pid alone.
func killProcessGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
