package worker

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// startGroup starts command in its own process group, as runShell does, and
// returns it with a channel closed once it has been waited for.
func startGroup(t *testing.T, command string) (*exec.Cmd, *bufio.Reader, chan struct{}) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})
	return cmd, bufio.NewReader(out), waited
}

// A worker that died (kill -9) while shell commands ran leaves them listed;
// the next worker process on the same data dir kills each whole group whose
// leader is still the same process, reports its run as killed, and leaves
// alone a pid that now belongs to another process. Odd entries are dropped.
func TestShellCommandsLeftByADeadWorkerAreKilledAtTheNextStart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	g, err := newShellGroups(dataDir, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	// Left running: a shell and its background child, in one group.
	left, out, leftDone := startGroup(t, "sleep 300 & echo $!; wait")
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	rep := protocol.RunReport{ID: "run-left", TaskID: "t1", Node: "w1", ScheduledAt: at, StartedAt: at, Attempt: 2}
	_ = g.record(left.Process.Pid, &rep) // never forgotten: the worker "died"

	// Another process that has the pid of a listed one (its start time differs).
	other, _, otherDone := startGroup(t, "sleep 300")
	_ = g.record(other.Process.Pid, &protocol.RunReport{ID: "run-reused", TaskID: "t1", Node: "w1", StartedAt: at, Attempt: 1})
	entry := filepath.Join(dataDir, ShellGroupsDir, strconv.Itoa(other.Process.Pid))
	b, _ := os.ReadFile(entry)
	if err := os.WriteFile(entry, []byte(strings.Replace(string(b), `"start":"`, `"start":"1`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A command that ended before the worker died: nothing to kill or report.
	ended, _, endedDone := startGroup(t, "true")
	_ = g.record(ended.Process.Pid, &protocol.RunReport{ID: "run-ended", TaskID: "t1", Node: "w1", StartedAt: at, Attempt: 1})
	<-endedDone
	// Odd entries.
	dir := filepath.Join(dataDir, ShellGroupsDir)
	for name, body := range map[string]string{"12345": "not json", "777": `{"pid":778}`, "1": `{"pid":1}`, "999.tmp": "{"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	next, err := newShellGroups(dataDir, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	reports := next.reap(time.Now())
	if len(reports) != 1 {
		t.Fatalf("reap reported %d runs, want 1 (the command left running): %+v", len(reports), reports)
	}
	got := reports[0]
	if got.ID != "run-left" || got.TaskID != "t1" || got.Node != "w1" || got.Attempt != 2 || !got.StartedAt.Equal(at) ||
		got.Result != protocol.ResultKilled || !strings.Contains(got.Output, "worker process running this command died") ||
		got.DurationMS < 60_000 {
		t.Fatalf("report = %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("report invalid: %v", err)
	}
	select {
	case <-leftDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the command left running was not killed")
	}
	if ws := left.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the command left running ended with %v, want SIGKILL", left.ProcessState)
	}
	waitFor(t, "its background child to be gone", func() bool {
		return procStart(child) == ""
	})
	select {
	case <-otherDone:
		t.Fatal("a process holding a listed pid, with another start time, was killed")
	default:
	}
	if rest, _ := os.ReadDir(dir); len(rest) != 0 {
		t.Fatalf("the list still holds %d entries after the reap", len(rest))
	}
	// A second start finds nothing left to do.
	if again := next.reap(time.Now()); len(again) != 0 {
		t.Fatalf("second reap: %+v", again)
	}
}

// A shell run is listed while it runs and taken off once it ended; without a
// data dir nothing is listed.
func TestShellRunsAreListedWhileTheyRun(t *testing.T) {
	t.Parallel()
	r, sink := newLiveRunner(t, 50*time.Millisecond)
	dataDir := t.TempDir()
	g, err := newShellGroups(dataDir, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	r.pgroups = g
	dir := filepath.Join(dataDir, ShellGroupsDir)
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t9", Title: "t", Type: protocol.TaskShell,
		Timeout:  protocol.Duration(60 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Shell:    &protocol.ShellSpec{Command: "sleep 300"}}, Executors: 1}
	r.runOnce(spec, nil)
	id := onlyLiveRun(t, r)
	var entries []os.DirEntry
	waitFor(t, "the command listed", func() bool { entries, _ = os.ReadDir(dir); return len(entries) == 1 })
	b, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	if err != nil || !strings.Contains(string(b), `"run_id":"`+id+`"`) || !strings.Contains(string(b), `"task_id":"t9"`) {
		t.Fatalf("entry %s: %s %v", entries[0].Name(), b, err)
	}
	pid, _ := strconv.Atoi(entries[0].Name())
	if procStart(pid) == "" {
		t.Fatalf("listed pid %d does not run", pid)
	}
	if !r.live.kill(id, "alice") {
		t.Fatal("kill said the run is not here")
	}
	if final := finalReport(t, sink, id); final.Result != protocol.ResultKilled {
		t.Fatalf("final report %s", final.Result)
	}
	if rest, _ := os.ReadDir(dir); len(rest) != 0 {
		t.Fatalf("%d entries listed after the run ended", len(rest))
	}

	none, err := newShellGroups("", testutil.Discard())
	if err != nil || none.reap(time.Now()) != nil {
		t.Fatalf("no data dir: %v", err)
	}
	none.record(pid, &protocol.RunReport{ID: "x"})() // no file, no panic
}
