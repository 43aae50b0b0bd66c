package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// ShellGroupsDir is the folder, in the data dir, that lists the process
// groups of shell commands in progress.
const ShellGroupsDir = "shell-groups"

// shellGroups lists the shell commands in progress in the data dir, one small
// file per process group, so that a worker started after its predecessor died
// (kill -9, out of memory) kills the commands that one left running. Left
// alone they would run on beside the next fire of the same task, and their
// end would never be reported. Without a data dir (dir "", or a nil list)
// nothing is listed.
type shellGroups struct {
	dir string
	log *slog.Logger
}

// shellGroup is one listed command: its process group (the leader's pid), the
// leader's start time, which tells it from a later process given the same
// pid, and the run it belongs to.
type shellGroup struct {
	PID int `json:"pid"`
	// Start is the leader's start time in clock ticks since boot (field 22
	// of /proc/PID/stat); "" where the system has no /proc.
	Start       string    `json:"start"`
	RunID       string    `json:"run_id"`
	TaskID      string    `json:"task_id"`
	Node        string    `json:"node"`
	ScheduledAt time.Time `json:"scheduled_at"`
	StartedAt   time.Time `json:"started_at"`
	Attempt     int       `json:"attempt"`
	Manual      bool      `json:"manual,omitempty"`
	TaskVersion int       `json:"task_version,omitempty"`
	WorkflowRun string    `json:"workflow_run,omitempty"`
	Step        string    `json:"workflow_step,omitempty"`
}

// newShellGroups returns the list kept in dataDir, creating its folder. With
// no data dir it keeps nothing.
func newShellGroups(dataDir string, log *slog.Logger) (*shellGroups, error) {
	g := &shellGroups{log: log}
	if dataDir == "" {
		return g, nil
	}
	g.dir = filepath.Join(dataDir, ShellGroupsDir)
	if err := os.MkdirAll(g.dir, 0o700); err != nil {
		return nil, fmt.Errorf("worker: shell groups: %w", err)
	}
	return g, nil
}

// record lists the process group of a command that has just started for
// run rep; forget, called once the command has ended, takes it off. A list
// that cannot be written costs the run nothing: it is logged, and only the
// clean-up after a crash is lost.
func (g *shellGroups) record(pid int, rep *protocol.RunReport) (forget func()) {
	if g == nil || g.dir == "" {
		return func() {}
	}
	e := shellGroup{PID: pid, Start: procStart(pid), RunID: rep.ID, TaskID: rep.TaskID, Node: rep.Node,
		ScheduledAt: rep.ScheduledAt, StartedAt: rep.StartedAt, Attempt: rep.Attempt, Manual: rep.Manual, TaskVersion: rep.TaskVersion,
		WorkflowRun: rep.WorkflowRun, Step: rep.WorkflowStep}
	b, err := json.Marshal(e)
	path := filepath.Join(g.dir, strconv.Itoa(pid))
	if err == nil {
		// Written whole then renamed, so that a crash never leaves half an
		// entry. No fsync: the entry matters only when this process dies and
		// the machine does not, and then the page cache keeps it.
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		g.log.Warn("cannot list a shell command in progress; after a crash of this worker it would be left running",
			"run", rep.ID, "pid", pid, "err", err)
		return func() {}
	}
	return func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.log.Warn("cannot take an ended shell command off the list", "run", rep.ID, "pid", pid, "err", err)
		}
	}
}

// reap kills the process groups a previous worker process listed and did not
// take off (it died while they ran) and empties the list. It returns the
// final report of each run whose command was still running and was killed:
// the master then records it as killed instead of lost. A group whose leader
// has ended is killed too, for the commands it started, but its run's
// outcome is unknown and left to the master. An entry whose pid now belongs
// to another process (another start time) is left alone.
func (g *shellGroups) reap(now time.Time) []protocol.RunReport {
	if g == nil || g.dir == "" {
		return nil
	}
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		g.log.Error("cannot read the list of shell commands left running by a previous worker process", "dir", g.dir, "err", err)
		return nil
	}
	var reports []protocol.RunReport
	for _, de := range entries {
		path := filepath.Join(g.dir, de.Name())
		if rep, ok := g.reapOne(path, now); ok {
			reports = append(reports, rep)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.log.Warn("cannot take a reaped shell command off the list", "file", path, "err", err)
		}
	}
	return reports
}

func (g *shellGroups) reapOne(path string, now time.Time) (protocol.RunReport, bool) {
	if strings.HasSuffix(path, ".tmp") {
		return protocol.RunReport{}, false // a write that never finished: its command was not listed yet
	}
	b, err := os.ReadFile(path)
	var e shellGroup
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	if err == nil && (e.PID <= 1 || filepath.Base(path) != strconv.Itoa(e.PID)) {
		err = fmt.Errorf("pid %d does not match the file name", e.PID)
	}
	if err != nil {
		g.log.Warn("dropped an unreadable entry of the shell command list", "file", path, "err", err)
		return protocol.RunReport{}, false
	}
	start := procStart(e.PID)
	switch {
	case start != "" && start != e.Start:
		// The pid was given to another process since: not ours.
		g.log.Info("a shell command left by a previous worker process has ended; its pid is in use by another process",
			"run", e.RunID, "pid", e.PID)
		return protocol.RunReport{}, false
	case start == "" && e.Start == "":
		// No /proc to tell our process from a later one with its pid.
		g.log.Warn("a shell command left by a previous worker process may still run; this system cannot tell, "+
			"so it is not killed", "run", e.RunID, "pid", e.PID)
		return protocol.RunReport{}, false
	}
	// The leader is ours (same start time), or gone: a pid stays reserved
	// while it names a process group, so a group with this id is the
	// remainder of ours.
	err = killProcessGroup(e.PID)
	if start == "" {
		if err == nil {
			g.log.Warn("killed the commands a shell task started before the previous worker process died",
				"run", e.RunID, "task", e.TaskID, "pgid", e.PID)
		}
		return protocol.RunReport{}, false
	}
	if err != nil {
		g.log.Error("cannot kill a shell command left running by a previous worker process", "run", e.RunID, "pid", e.PID, "err", err)
		return protocol.RunReport{}, false
	}
	g.log.Warn("killed a shell command left running by a previous worker process", "run", e.RunID, "task", e.TaskID, "pid", e.PID)
	rep := protocol.RunReport{ID: e.RunID, TaskID: e.TaskID, Node: e.Node, ScheduledAt: e.ScheduledAt, StartedAt: e.StartedAt,
		EndedAt: now.UTC(), Attempt: e.Attempt, Manual: e.Manual, TaskVersion: e.TaskVersion,
		WorkflowRun: e.WorkflowRun, WorkflowStep: e.Step, Result: protocol.ResultKilled,
		Output: "[the worker process running this command died; the command was still running when the worker " +
			"started again, which killed it]"}
	if rep.EndedAt.Before(rep.StartedAt) {
		rep.EndedAt = rep.StartedAt
	}
	rep.DurationMS = rep.EndedAt.Sub(rep.StartedAt).Milliseconds()
	if err := rep.Validate(); err != nil {
		g.log.Warn("the killed command's run cannot be reported", "run", e.RunID, "err", err)
		return protocol.RunReport{}, false
	}
	return rep, true
}

// procStart returns the start time of process pid in clock ticks since boot,
// or "" when it does not run or the system has no /proc. A zombie (ended,
// not yet waited for) counts as not running.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name, field 2, is in parentheses and may hold spaces or
	// parentheses itself: the fields after it follow its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}
