package master_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// running creates, connects and enables a manual worker.
func (e *env) running(name string) *testWorker {
	e.t.Helper()
	tw := startWorker(e.t, name)
	e.create(tw)
	e.connect(name)
	e.enable(name)
	return tw
}

func failing(code int) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Error(rw, `{"error":"unavailable"}`, code)
	})
}

func TestSweepTakesDeadWorkerOffline(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		tw := e.running("w1")
		e.running("w2")
		old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := s.Store.DB.ExecContext(e.ctx, "UPDATE nodes SET last_seen = ? WHERE name = ?", old, masterName); err != nil {
			t.Fatal(err)
		}
		e.insertClaim("task-1", "w1")
		e.insertClaim("task-2", "w1")
		e.insertClaim("task-1b", "w2")
		tw.Srv.Close()

		for i := 1; i <= 2; i++ {
			res := e.m.Sweep(e.ctx)
			if res.Probed != 2 || res.Failed != 1 || res.Healthy != 1 || res.WentOffline != 0 {
				t.Fatalf("sweep %d = %+v", i, res)
			}
			n := e.node("w1")
			if n.Status != store.StatusRunning || n.Failures != i || !strings.Contains(n.Reason, "w1") {
				t.Fatalf("after sweep %d: status %d failures %d reason %q", i, n.Status, n.Failures, n.Reason)
			}
			if e.claimsOf("w1") != 2 {
				t.Fatalf("fire claims released before max failures")
			}
		}
		if m := e.node(masterName); !m.LastSeen.After(old) {
			t.Error("the sweep did not mark the master itself seen")
		}
		res := e.m.Sweep(e.ctx)
		if res.Failed != 1 || res.WentOffline != 1 {
			t.Fatalf("third sweep = %+v", res)
		}
		n := e.node("w1")
		if n.Status != store.StatusOffline || n.Failures != 0 || !strings.Contains(n.Reason, "health") || !strings.Contains(n.Reason, "3") {
			t.Errorf("after max failures: status %d failures %d reason %q", n.Status, n.Failures, n.Reason)
		}
		if n.DesiredStatus != store.StatusRunning {
			t.Errorf("desired status = %d, want kept at running for recovery", n.DesiredStatus)
		}
		if e.claimsOf("w1") != 0 {
			t.Error("claims of the offline node were not released")
		}
		if e.claimsOf("w2") != 1 {
			t.Error("a healthy node lost its claims")
		}
		if n := e.node("w2"); n.Status != store.StatusRunning || n.Failures != 0 {
			t.Errorf("the healthy node: %+v", n)
		}
		// Still down on later sweeps: nothing more is counted.
		for range 3 {
			res := e.m.Sweep(e.ctx)
			if res.Failed != 0 || res.WentOffline != 0 || res.Recovered != 0 {
				t.Errorf("sweep of a node already offline = %+v", res)
			}
		}
		if n := e.node("w1"); n.Status != store.StatusOffline || n.Failures != 0 {
			t.Errorf("offline node changed: %+v", n)
		}
	})
}

func TestSweepFlakyWorkerStaysOnline(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		tw := e.running("w1")
		var healthCalls atomic.Int32
		router := tw.Router()
		tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == protocol.PathHealth && healthCalls.Add(1) <= 2 {
				http.Error(rw, `{"error":"busy"}`, http.StatusInternalServerError)
				return
			}
			router.ServeHTTP(rw, r)
		}))
		for i := 1; i <= 2; i++ {
			if res := e.m.Sweep(e.ctx); res.Failed != 1 {
				t.Fatalf("sweep %d = %+v, want one failure", i, res)
			}
			if n := e.node("w1"); n.Failures != i || n.Status != store.StatusRunning {
				t.Fatalf("after sweep %d: %+v", i, n)
			}
		}
		seenBefore := e.node("w1").LastSeen
		res := e.m.Sweep(e.ctx)
		if res.Healthy != 1 || res.Failed != 0 || res.WentOffline != 0 {
			t.Fatalf("third sweep = %+v", res)
		}
		n := e.node("w1")
		if n.Status != store.StatusRunning || n.Failures != 0 || !n.LastSeen.After(seenBefore) {
			t.Errorf("after recovery: status %d failures %d last_seen %v (before %v)", n.Status, n.Failures, n.LastSeen, seenBefore)
		}
		if healthCalls.Load() != 3 {
			t.Errorf("%d health calls, want 3", healthCalls.Load())
		}
		if tw.W.Health().Status != protocol.StateScheduling {
			t.Error("the worker stopped scheduling")
		}
	})
}

func TestSweepHungWorkerDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		hung := startWorker(t, "hung")
		e.create(hung)
		e.connect("hung")
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // runs before the server's Close
		var hungCalls atomic.Int32
		var hungGaveUp atomic.Bool // the master's probe of hung timed out and hung up
		hung.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			hungCalls.Add(1)
			select {
			case <-release: // the test ends
			case <-r.Context().Done():
				hungGaveUp.Store(true)
			}
		}))
		// Each healthy worker counts the probes it answered before the
		// master gave up on hung; "hung" sorts before them, so a sweep that
		// probed one node after another would reach them only after that.
		// (Events, not times: a loaded machine slows a sweep, not its order.)
		const healthy = 20
		var beforeGiveUp atomic.Int32
		for i := range healthy {
			tw := startWorker(t, fmt.Sprintf("ok%02d", i))
			e.create(tw)
			e.connect(tw.cfg.Identity)
			router := tw.Router()
			tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if r.URL.Path == protocol.PathHealth && !hungGaveUp.Load() {
					beforeGiveUp.Add(1)
				}
				router.ServeHTTP(rw, r)
			}))
		}
		old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := s.Store.DB.ExecContext(e.ctx, "UPDATE nodes SET last_seen = ?", old); err != nil {
			t.Fatal(err)
		}

		res := e.m.Sweep(e.ctx)
		t.Logf("sweep with 1 hung + %d healthy workers took %s (probe timeout %s)", healthy, res.Took, probeTimeout)
		if res.Probed != healthy+1 || res.Healthy != healthy || res.Failed != 1 {
			t.Errorf("sweep = %+v", res)
		}
		if n := beforeGiveUp.Load(); n != healthy {
			t.Errorf("%d of %d healthy workers were probed before the hung probe timed out: the hung probe held the others up", n, healthy)
		}
		if hungCalls.Load() != 1 {
			t.Errorf("hung worker probed %d times", hungCalls.Load())
		}
		nodes, err := store.ListNodes(e.ctx, s.Store.DB)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			switch {
			case n.Name == "hung":
				if n.Failures != 1 || n.LastSeen.After(old) {
					t.Errorf("hung node: failures %d last_seen %v", n.Failures, n.LastSeen)
				}
			case !n.LastSeen.After(old) || n.Failures != 0:
				t.Errorf("healthy node %s: last_seen %v failures %d", n.Name, n.LastSeen, n.Failures)
			}
		}
	})
}

func TestSweepReconnectsRestartedManualWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		tw := e.running("w1")
		before := e.node("w1")
		oldWorker := tw.W

		// The worker process restarts on the same address: new boot id, new secret, not scheduling.
		nw := tw.Replace()
		if nw.BootID() == before.BootID || nw.CheckSecret(before.Secret) {
			t.Fatal("the replacement worker shares the old boot id or secret")
		}
		res := e.m.Sweep(e.ctx)
		if res.Recovered != 1 || res.Failed != 0 {
			t.Fatalf("sweep = %+v, want one recovery", res)
		}
		n := e.node("w1")
		if n.Status != store.StatusRunning || n.BootID != nw.BootID() || n.Secret == before.Secret || n.Failures != 0 || n.Reason != "" {
			t.Errorf("after recovery: %+v", n)
		}
		if !nw.CheckSecret(n.Secret) {
			t.Error("the new worker does not accept the stored secret")
		}
		if oldWorker.CheckSecret(n.Secret) {
			t.Error("the old worker accepts the new secret")
		}
		if h := nw.Health(); h.Status != protocol.StateScheduling {
			t.Errorf("the new worker is %q, want scheduling", h.Status)
		}
		// And the next sweep sees it healthy.
		if res := e.m.Sweep(e.ctx); res.Healthy != 1 || res.Recovered != 0 {
			t.Errorf("next sweep = %+v", res)
		}

		// A restarted idle (connected, not enabled) worker comes back idle.
		t2 := startWorker(t, "w2")
		e.create(t2)
		e.connect("w2")
		nw2 := t2.Replace()
		if res := e.m.Sweep(e.ctx); res.Recovered != 1 {
			t.Errorf("sweep = %+v, want the idle worker recovered", res)
		}
		if n := e.node("w2"); n.Status != store.StatusIdle || n.BootID != nw2.BootID() || !nw2.CheckSecret(n.Secret) {
			t.Errorf("idle worker after restart: %+v", n)
		}
		if nw2.Health().Status != protocol.StateIdle {
			t.Errorf("idle worker state = %q", nw2.Health().Status)
		}
	})
}

func TestSweepRecoversOfflineManualWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.Health.OfflineEvery = 1 })
		tw := e.running("w1")
		tw.Serve(failing(http.StatusServiceUnavailable))
		for range 3 {
			e.m.Sweep(e.ctx)
		}
		if n := e.node("w1"); n.Status != store.StatusOffline || n.DesiredStatus != store.StatusRunning {
			t.Fatalf("node did not go offline: %+v", n)
		}
		// Still down: probed (offline every sweep) but nothing happens.
		if res := e.m.Sweep(e.ctx); res.Probed != 1 || res.Recovered != 0 || res.Failed != 0 {
			t.Errorf("sweep while down = %+v", res)
		}
		// The worker comes back as a new process.
		nw := tw.Replace()
		res := e.m.Sweep(e.ctx)
		if res.Recovered != 1 {
			t.Fatalf("sweep = %+v, want one recovery", res)
		}
		n := e.node("w1")
		if n.Status != store.StatusRunning || n.BootID != nw.BootID() || !nw.CheckSecret(n.Secret) || n.Reason != "" || n.Failures != 0 {
			t.Errorf("after recovery: %+v", n)
		}
		if nw.Health().Status != protocol.StateScheduling {
			t.Errorf("recovered worker is %q, want scheduling", nw.Health().Status)
		}

		// A node an admin never connected (desired offline) is not probed at all.
		t2 := startWorker(t, "never")
		e.create(t2)
		if res := e.m.Sweep(e.ctx); res.Probed != 1 {
			t.Errorf("sweep probed %d nodes, want only w1", res.Probed)
		}
		if t2.W.Health().Status != protocol.StateWaiting {
			t.Error("the master connected a node nobody asked it to")
		}
	})
}

func TestSweepOfflineCadence(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.Health.OfflineEvery = 3 })
		tw := e.running("w1")
		tw.Serve(failing(http.StatusInternalServerError))
		for range 3 { // sweeps 1-3
			e.m.Sweep(e.ctx)
		}
		if n := e.node("w1"); n.Status != store.StatusOffline {
			t.Fatalf("node not offline: %+v", n)
		}
		// Sweep 4 probes offline nodes (the worker is still down).
		if res := e.m.Sweep(e.ctx); res.Probed != 1 || res.Recovered != 0 {
			t.Fatalf("sweep 4 = %+v", res)
		}
		tw.Serve(tw.Router()) // same process answers again
		for i := 5; i <= 6; i++ {
			if res := e.m.Sweep(e.ctx); res.Probed != 0 {
				t.Errorf("sweep %d probed offline nodes: %+v", i, res)
			}
		}
		if n := e.node("w1"); n.Status != store.StatusOffline {
			t.Fatalf("recovered on a fast sweep: %+v", n)
		}
		if res := e.m.Sweep(e.ctx); res.Probed != 1 || res.Recovered != 1 { // sweep 7
			t.Fatalf("sweep 7 = %+v, want the node recovered", res)
		}
		n := e.node("w1")
		if n.Status != store.StatusRunning || n.BootID != tw.W.BootID() || !tw.W.CheckSecret(n.Secret) {
			t.Errorf("after recovery: %+v", n)
		}
	})
}

func TestSweepAutoWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.Health.OfflineEvery = 1 })
		url := e.serveMaster()
		tw := startWorker(t, "auto1", autoCfg(url))
		runWorker(t, tw.W)
		first := e.node("auto1")

		// Unreachable for max failures: offline, desired stays running.
		router := tw.Router()
		tw.Serve(failing(http.StatusBadGateway))
		for range 3 {
			e.m.Sweep(e.ctx)
		}
		if n := e.node("auto1"); n.Status != store.StatusOffline || n.DesiredStatus != store.StatusRunning {
			t.Fatalf("auto worker not offline: %+v", n)
		}
		// The same process answers again: the master brings it back with the secret it has.
		tw.Serve(router)
		if res := e.m.Sweep(e.ctx); res.Recovered != 1 {
			t.Fatalf("sweep = %+v, want the auto worker recovered", res)
		}
		if n := e.node("auto1"); n.Status != store.StatusRunning || n.Secret != first.Secret || n.BootID != first.BootID {
			t.Errorf("after recovery: %+v", n)
		}

		// The process restarts: its secret died with it; the node goes offline until it registers again.
		nw := tw.Replace()
		res := e.m.Sweep(e.ctx)
		if res.Recovered != 0 {
			t.Errorf("sweep = %+v, the master cannot recover an auto worker by itself", res)
		}
		n := e.node("auto1")
		if n.Status != store.StatusOffline || !strings.Contains(n.Reason, "restarted") {
			t.Errorf("restarted auto worker: status %d reason %q", n.Status, n.Reason)
		}
		runWorker(t, nw)
		storetest.Eventually(t, 10*time.Second, func() bool {
			n, err := store.GetNode(e.ctx, s.Store.DB, "auto1")
			return err == nil && n.Status == store.StatusRunning && n.BootID == nw.BootID()
		}, "the restarted auto worker did not register again")
		if n := e.node("auto1"); !nw.CheckSecret(n.Secret) {
			t.Error("the stored secret is not the new process's")
		}
		if res := e.m.Sweep(e.ctx); res.Healthy != 1 {
			t.Errorf("sweep after re-registration = %+v", res)
		}
	})
}

// A manual worker started without --identity learns its name at Connect; after a
// restart it answers /health with no name until the master connects it again.
func TestSweepReconnectsRestartedAnonymousManualWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		tw := startWorker(t, "", func(c *worker.Config) { c.Identity = "" })
		cfg := tw.Config()
		cfg.Name = "anon1"
		if _, err := e.m.Nodes().Create(e.ctx, cfg); err != nil {
			t.Fatal(err)
		}
		e.connect("anon1")
		e.enable("anon1")
		if tw.W.Name() != "anon1" {
			t.Fatalf("worker name after connect = %q", tw.W.Name())
		}
		before := e.node("anon1")
		nw := tw.Replace()
		if h := nw.Health(); h.Node != "" || h.Status != protocol.StateWaiting {
			t.Fatalf("restarted anonymous worker health = %+v", h)
		}
		res := e.m.Sweep(e.ctx)
		if res.Recovered != 1 || res.Failed != 0 {
			t.Fatalf("sweep = %+v, want the restarted worker reconnected", res)
		}
		n := e.node("anon1")
		if n.Status != store.StatusRunning || n.BootID != nw.BootID() || n.BootID == before.BootID || !nw.CheckSecret(n.Secret) {
			t.Errorf("after recovery: %+v", n)
		}
		if h := nw.Health(); h.Node != "anon1" || h.Status != protocol.StateScheduling {
			t.Errorf("worker after recovery: %+v", h)
		}
	})
}

// A worker that answers but says it is degraded (its data dir is full) stays
// running, and the sweep records why on the node, "degraded: ..." in its
// reason, until the worker says it is fine again.
func TestSweepRecordsADegradedWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		tw := e.running("w1")
		e.running("w2")
		var degraded atomic.Value
		degraded.Store("data directory full: runs.spool: write runs.spool: no space left on device")
		router := tw.Router()
		tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path != protocol.PathHealth {
				router.ServeHTTP(rw, r)
				return
			}
			h := tw.W.Health()
			h.Degraded = degraded.Load().(string)
			rw.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(rw).Encode(h)
		}))
		if res := e.m.Sweep(e.ctx); res.Healthy != 2 || res.Failed != 0 {
			t.Fatalf("sweep = %+v, want both healthy", res)
		}
		n := e.node("w1")
		want := "degraded: data directory full: runs.spool: write runs.spool: no space left on device"
		if n.Status != store.StatusRunning || n.Reason != want || !master.NodeDegraded(n.Reason) {
			t.Fatalf("degraded worker: status %d reason %q, want running with %q", n.Status, n.Reason, want)
		}
		if n := e.node("w2"); n.Reason != "" || master.NodeDegraded(n.Reason) {
			t.Fatalf("the sound worker got reason %q", n.Reason)
		}
		degraded.Store("")
		e.m.Sweep(e.ctx)
		if n := e.node("w1"); n.Status != store.StatusRunning || n.Reason != "" {
			t.Fatalf("after recovery: status %d reason %q, want running with no reason", n.Status, n.Reason)
		}
	})
}
