package main

import (
	"strings"
	"testing"
	"time"
)

// TestProcessRunLostWithItsWorker: a run in progress on a worker that is
// killed (-9) cannot report its end. Once the health checks take the node
// offline, the run is recorded as lost, saying why, instead of staying
// "running" for ever; it counts as a failure in the task's health.
func TestProcessRunLostWithItsWorker(t *testing.T) {
	m := startMaster(t, "")
	w, _ := startWorker(t, m, "doomed", "--allow-shell")
	m.waitNode("doomed", 30*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	// The command outlives the worker (its own process group) but ends soon.
	task := m.createTask(`{"title":"long sync","type":"shell","schedule":{"kind":"interval","every":"1h"},
		"shell":{"command":"sleep 20"},"timeout":"1m","executors":["doomed"]}`)
	m.taskAction(task.ID, "run")
	runs := m.waitRuns(task.ID, 20*time.Second, "the run listed as running", func(r []runJSON) bool {
		return len(r) == 1 && r[0].Result == "running"
	})
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
}
