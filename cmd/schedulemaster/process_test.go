package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestProcessAutoWorkerAppearsRunning(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	w, host := startWorker(t, m, "auto1", "--priority", "4", "--maxc", "9")
	m.waitNode("auto1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	n := m.node("auto1")
	if n.Mode != "auto" || n.Host != host || n.Type != "worker" || n.Priority != 1 {
		t.Fatalf("auto worker row %+v, want mode auto at %s with its --priority 4 capped at 1", n, host)
	}
	// The master registers itself as a node of type master.
	if self := m.node("master"); self == nil || self.Type != "master" || self.Status != 2 {
		t.Fatalf("master's own node: %+v", self)
	}
	// Graceful stop: the worker tells the master, then exits 0.
	if err := w.term(); err != nil {
		t.Fatalf("worker exit after SIGTERM: %v", err)
	}
	n = m.node("auto1")
	if n.Status != 0 || !strings.Contains(n.Reason, "graceful") {
		t.Fatalf("after SIGTERM: %+v, want offline with a graceful-shutdown reason", n)
	}
	if err := m.term(); err != nil {
		t.Fatalf("master exit after SIGTERM: %v", err)
	}
}

func TestProcessManualWorkerAppearsOnlyAfterConnect(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	_, host := startWorker(t, m, "man1", "--autor=false", "--workerof", "master")
	// A manual worker does not register itself: give it a few health intervals.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := m.node("man1"); n != nil {
			t.Fatalf("manual worker appeared by itself: %+v", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	status, body := m.api("POST", "/api/v1/nodes", `{"name":"man1","host":"`+host+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	if n := m.node("man1"); n.Status != 0 || n.Mode != "manual" {
		t.Fatalf("created %+v", n)
	}
	if status, body := m.api("POST", "/api/v1/nodes/man1/connect", ""); status != 200 {
		t.Fatalf("connect: %d %s", status, body)
	}
	if status, body := m.api("POST", "/api/v1/nodes/man1/enable", ""); status != 200 {
		t.Fatalf("enable: %d %s", status, body)
	}
	if n := m.node("man1"); n.Status != 2 {
		t.Fatalf("after enable: %+v", n)
	}
}

func TestProcessWrongWorkerOfRefused(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	_, host := startWorker(t, m, "man2", "--autor=false", "--workerof", "other-master")
	if status, body := m.api("POST", "/api/v1/nodes", `{"name":"man2","host":"`+host+`"}`); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body := m.api("POST", "/api/v1/nodes/man2/connect", "")
	if status != http.StatusBadGateway || !strings.Contains(body, "man2") || !strings.Contains(body, "another cluster") {
		t.Fatalf("connect to a worker of another master: %d %s", status, body)
	}
	if n := m.node("man2"); n.Status != 0 {
		t.Fatalf("refused connect changed the node: %+v", n)
	}
}

// A worker killed with SIGKILL is offline within interval x max_failures + one
// probe timeout (1s x 3 + 500ms here). The extra second covers process
// scheduling on a loaded 2-core CI machine under -race and the API poll step.
func TestProcessKilledWorkerTurnsOffline(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	w, _ := startWorker(t, m, "victim")
	_, _ = startWorker(t, m, "bystander")
	m.waitNode("victim", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	m.waitNode("bystander", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	w.kill()
	took := m.waitNode("victim", 20*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	bound := 3*time.Second + 500*time.Millisecond
	t.Logf("killed worker detected offline after %s (bound %s)", took.Round(time.Millisecond), bound)
	if took > bound+time.Second {
		t.Fatalf("detection took %s, bound is %s", took, bound)
	}
	n := m.node("victim")
	if !strings.Contains(n.Reason, "failed health checks") || n.Failures != 0 {
		t.Fatalf("offline node %+v: want a health-check reason and the counter reset", n)
	}
	if b := m.node("bystander"); b.Status != 2 || b.Failures != 0 {
		t.Fatalf("the healthy worker was affected: %+v", b)
	}
}

func TestProcessRestartedWorkersRecovered(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	// Manual worker, connected and enabled by the admin.
	man, manHost := startWorker(t, m, "rman", "--autor=false", "--workerof", "master")
	if status, body := m.api("POST", "/api/v1/nodes", `{"name":"rman","host":"`+manHost+`"}`); status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	for _, a := range []string{"connect", "enable"} {
		if status, body := m.api("POST", "/api/v1/nodes/rman/"+a, ""); status != 200 {
			t.Fatalf("%s: %d %s", a, status, body)
		}
	}
	// Auto worker.
	// Its data dir holds its node key: the restart must prove the same key.
	autoDir := t.TempDir()
	auto, autoHost := startWorker(t, m, "rauto", "--data-dir", autoDir)
	m.waitNode("rauto", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	// Restart both on the same ports: new processes, new boot ids, new secrets.
	man.kill()
	auto.kill()
	_, port, _ := strings.Cut(manHost, ":")
	man2, _ := startWorker(t, m, "rman", "--autor=false", "--workerof", "master", "--port", port)
	_, aport, _ := strings.Cut(autoHost, ":")
	_, _ = startWorker(t, m, "rauto", "--port", aport, "--data-dir", autoDir)

	// The master reconnects the manual worker (it answers with a new boot id,
	// or comes back after it went offline) and puts it back to running.
	// Its row may still say running from before the kill, so wait for the new
	// process to have been connected and told to schedule.
	deadline := time.Now().Add(30 * time.Second)
	for !(man2.logged("connected to master") && man2.logged("scheduling started")) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted manual worker was not reconnected and restarted by the master within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.waitLogged(t, `msg="node recovered" node=rman`, 1, 10*time.Second)
	m.waitNode("rman", 10*time.Second, "running again", func(n *nodeJSON) bool { return n.Status == 2 })
	// The auto worker registers itself again (a second registration line).
	m.waitLogged(t, `msg="worker registered" node=rauto`, 2, 30*time.Second)
	m.waitNode("rauto", 30*time.Second, "running again", func(n *nodeJSON) bool { return n.Status == 2 && n.Mode == "auto" })
}
