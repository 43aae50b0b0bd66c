package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessRunLostWithItsWorker: a run in progress on a worker that is
// killed (-9) cannot report its end. Once the health checks take the node
// offline, the run is recorded as lost, saying why, instead of staying
// "running" for ever; it counts as a failure in the task's health. The
// command itself, in its own process group, outlives the worker: when the
// worker starts again on the same data dir it kills the command and reports
// the run as killed, so it never runs on beside the task's next runs.
func TestProcessRunLostWithItsWorker(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	dataDir, pidFile := t.TempDir(), filepath.Join(t.TempDir(), "leader.pid")
	w, _ := startWorker(t, m, "doomed", "--allow-shell", "--data-dir", dataDir)
	m.waitNode("doomed", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	task := m.createTask(`{"title":"long sync","type":"shell","schedule":{"kind":"interval","every":"1h"},
		"shell":{"command":"echo $$ > ` + pidFile + `; sleep 120"},"timeout":"5m","executors":["doomed"]}`)
	m.taskAction(task.ID, "run")
	runs := m.waitRuns(task.ID, 20*time.Second, "the run listed as running", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "running"
	})
	b, err := os.ReadFile(pidFile)
	leader, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || leader <= 1 {
		t.Fatalf("the command's pid: %q %v", b, err)
	}
	w.kill()
	m.waitNode("doomed", 30*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	lost := m.waitRuns(task.ID, 10*time.Second, "the run marked lost", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "lost"
	})
	if lost[0].ID != runs[0].ID {
		t.Fatalf("lost run %s, want %s", lost[0].ID, runs[0].ID)
	}
	status, body := m.api("GET", "/api/v1/runs/"+runs[0].ID, "")
	if status != 200 || !strings.Contains(body, "went offline") || !strings.Contains(body, "result is unknown") {
		t.Fatalf("lost run: %d %s; want its output to say why", status, body)
	}
	if status, body := m.api("POST", "/api/v1/runs/"+runs[0].ID+"/kill", ""); status != 409 {
		t.Fatalf("kill of a lost run: %d %s, want 409", status, body)
	}
	if !processRuns(leader) {
		t.Fatalf("the command (pid %d) ended with its worker; this test needs it to outlive the worker", leader)
	}

	// The worker starts again on the same data dir.
	startWorker(t, m, "doomed", "--allow-shell", "--data-dir", dataDir)
	deadline := time.Now().Add(20 * time.Second)
	for processRuns(leader) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) left by the dead worker still runs after its restart", leader)
		}
		time.Sleep(50 * time.Millisecond)
	}
	killed := m.waitRuns(task.ID, 20*time.Second, "the lost run reported as killed", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "killed"
	})
	if killed[0].ID != runs[0].ID {
		t.Fatalf("killed run %s, want %s", killed[0].ID, runs[0].ID)
	}
	if status, body := m.api("GET", "/api/v1/runs/"+runs[0].ID, ""); status != 200 || !strings.Contains(body, "worker process running this command died") {
		t.Fatalf("killed run: %d %s; want its output to say what happened", status, body)
	}
}

// processRuns reports whether pid is a live process (not gone, not a zombie).
func processRuns(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
