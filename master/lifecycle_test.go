package master_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

func TestLifecycleTransitions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		tw := startWorker(t, "w1")

		// refused asserts the action fails with ErrState and leaves the row as it was.
		refused := func(label string, act func() error) {
			t.Helper()
			before := e.snapshot("w1")
			err := act()
			if !errors.Is(err, master.ErrState) {
				t.Errorf("%s: error = %v, want ErrState", label, err)
			} else if !strings.Contains(err.Error(), "w1") {
				t.Errorf("%s: error %q does not name the node", label, err)
			}
			if after := e.snapshot("w1"); after != before {
				t.Errorf("%s changed the node:\nbefore %s\nafter  %s", label, before, after)
			}
		}
		connect := func() error { _, err := e.m.Nodes().Connect(e.ctx, "w1"); return err }
		enable := func() error { _, err := e.m.Nodes().Enable(e.ctx, "w1"); return err }
		disable := func() error { _, err := e.m.Nodes().Disable(e.ctx, "w1"); return err }
		del := func() error { return e.m.Nodes().Delete(e.ctx, "w1") }

		// create -> offline, manual
		n := e.create(tw)
		if n.Status != store.StatusOffline || n.Mode != store.ModeManual || n.Type != store.TypeWorker || n.DesiredStatus != store.StatusOffline {
			t.Fatalf("created node = %+v", n)
		}
		refused("Enable from offline", enable)
		refused("Disable from offline", disable)
		if h := tw.W.Health(); h.Status != protocol.StateWaiting {
			t.Errorf("worker state after refused actions = %q", h.Status)
		}

		// connect: offline -> idle, stores the worker's secret and boot id
		n = e.connect("w1")
		if n.Status != store.StatusIdle || n.DesiredStatus != store.StatusIdle || n.BootID != tw.W.BootID() || n.LastSeen.IsZero() {
			t.Fatalf("after connect: %+v", n)
		}
		if !tw.W.CheckSecret(n.Secret) {
			t.Fatal("the stored secret is not the one the worker accepts")
		}
		if h := tw.W.Health(); h.Status != protocol.StateIdle {
			t.Errorf("worker state after connect = %q, want idle", h.Status)
		}
		refused("Connect from idle", connect)
		refused("Disable from idle", disable)
		if !tw.W.CheckSecret(e.node("w1").Secret) {
			t.Error("a refused Connect rotated the worker's secret")
		}

		// enable: idle -> running
		n = e.enable("w1")
		if n.Status != store.StatusRunning || n.DesiredStatus != store.StatusRunning {
			t.Fatalf("after enable: %+v", n)
		}
		if h := tw.W.Health(); h.Status != protocol.StateScheduling {
			t.Errorf("worker state after enable = %q, want scheduling", h.Status)
		}
		refused("Connect from running", connect)
		refused("Enable from running", enable)
		refused("Delete running", del)

		// edit is allowed in any state and persists every field
		cfg := tw.Config()
		cfg.Priority, cfg.MaxConcurrency = 42, 7
		n, err := e.m.Nodes().Update(e.ctx, "w1", cfg)
		if err != nil {
			t.Fatalf("UpdateNode while running: %v", err)
		}
		if got := e.node("w1"); got.Priority != 42 || got.MaxConcurrency != 7 || got.Status != store.StatusRunning || n.Priority != 42 {
			t.Errorf("after edit: %+v", got)
		}

		// disable: running -> idle, fire claims released
		e.insertClaim("task-1", "w1")
		e.insertClaim("task-1", "other")
		n, err = e.m.Nodes().Disable(e.ctx, "w1")
		if err != nil {
			t.Fatalf("DisableNode: %v", err)
		}
		if n.Status != store.StatusIdle || n.DesiredStatus != store.StatusIdle {
			t.Errorf("after disable: %+v", n)
		}
		if h := tw.W.Health(); h.Status != protocol.StateIdle {
			t.Errorf("worker state after disable = %q, want idle", h.Status)
		}
		if c := e.claimsOf("w1"); c != 0 {
			t.Errorf("claims after disable = %d, want 0", c)
		}
		if c := e.claimsOf("other"); c != 1 {
			t.Errorf("another node's claims = %d, want 1", c)
		}
		refused("Connect after disable", connect)
		refused("Disable twice", disable)

		// enable again, then disable again: the cycle repeats
		e.enable("w1")
		if _, err := e.m.Nodes().Disable(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}

		// delete from idle
		if err := e.m.Nodes().Delete(e.ctx, "w1"); err != nil {
			t.Fatalf("DeleteNode idle: %v", err)
		}
		if _, err := e.m.Nodes().Get(e.ctx, "w1"); !errors.Is(err, master.ErrNotFound) {
			t.Errorf("GetNode after delete = %v, want ErrNotFound", err)
		}

		// delete from offline
		tw2 := startWorker(t, "w2")
		e.create(tw2)
		if err := e.m.Nodes().Delete(e.ctx, "w2"); err != nil {
			t.Errorf("DeleteNode offline: %v", err)
		}
		if e.countNodes() != 0 {
			t.Errorf("%d nodes left", e.countNodes())
		}
	})
}

func TestUnknownNodeAndMasterNode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		cfg := protocol.NodeConfig{Name: "ghost", Protocol: "http", Host: "127.0.0.1:9", Priority: 1, MaxConcurrency: 1}
		for label, err := range map[string]error{
			"Get":     func() error { _, err := e.m.Nodes().Get(e.ctx, "ghost"); return err }(),
			"Connect": func() error { _, err := e.m.Nodes().Connect(e.ctx, "ghost"); return err }(),
			"Enable":  func() error { _, err := e.m.Nodes().Enable(e.ctx, "ghost"); return err }(),
			"Disable": func() error { _, err := e.m.Nodes().Disable(e.ctx, "ghost"); return err }(),
			"Update":  func() error { _, err := e.m.Nodes().Update(e.ctx, "ghost", cfg); return err }(),
			"Delete":  e.m.Nodes().Delete(e.ctx, "ghost"),
		} {
			if !errors.Is(err, master.ErrNotFound) || !strings.Contains(err.Error(), "ghost") {
				t.Errorf("%s unknown node: %v, want ErrNotFound naming it", label, err)
			}
		}
		if e.countNodes() != 0 {
			t.Error("actions on an unknown node created a row")
		}

		e.addMasterNode()
		before := e.snapshot(masterName)
		mcfg := protocol.NodeConfig{Name: masterName, Protocol: "http", Host: "127.0.0.1:2", Priority: 1, MaxConcurrency: 1}
		for label, err := range map[string]error{
			"Connect": func() error { _, err := e.m.Nodes().Connect(e.ctx, masterName); return err }(),
			"Enable":  func() error { _, err := e.m.Nodes().Enable(e.ctx, masterName); return err }(),
			"Disable": func() error { _, err := e.m.Nodes().Disable(e.ctx, masterName); return err }(),
			"Update":  func() error { _, err := e.m.Nodes().Update(e.ctx, masterName, mcfg); return err }(),
			"Delete":  e.m.Nodes().Delete(e.ctx, masterName),
		} {
			if !errors.Is(err, master.ErrState) {
				t.Errorf("%s on the master node: %v, want ErrState", label, err)
			}
		}
		if after := e.snapshot(masterName); after != before {
			t.Errorf("actions on the master node changed it:\n%s\n%s", before, after)
		}
	})
}

func TestValidationChangesNothing(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		tw := startWorker(t, "w1")
		e.create(tw)
		before := e.snapshot("w1")
		good := tw.Config()

		bad := []struct {
			field string
			edit  func(*protocol.NodeConfig)
		}{
			{"name", func(c *protocol.NodeConfig) { c.Name = "bad name" }},
			{"name", func(c *protocol.NodeConfig) { c.Name = strings.Repeat("n", 65) }},
			{"protocol", func(c *protocol.NodeConfig) { c.Protocol = "gopher" }},
			{"host", func(c *protocol.NodeConfig) { c.Host = "127.0.0.1" }},
			{"host", func(c *protocol.NodeConfig) { c.Host = "127.0.0.1:99999" }},
			{"priority", func(c *protocol.NodeConfig) { c.Priority = -1 }},
			{"max_concurrency", func(c *protocol.NodeConfig) { c.MaxConcurrency = 0 }},
		}
		for _, b := range bad {
			c := good
			c.Name = "new1"
			b.edit(&c)
			n, err := e.m.Nodes().Create(e.ctx, c)
			if !isFieldErrors(err, b.field) || n != nil {
				t.Errorf("CreateNode(%+v) = %v, want FieldErrors on %s", c, err, b.field)
			}
			if b.field == "name" {
				continue
			}
			c.Name = "w1"
			if _, err := e.m.Nodes().Update(e.ctx, "w1", c); !isFieldErrors(err, b.field) {
				t.Errorf("UpdateNode(%+v) = %v, want FieldErrors on %s", c, err, b.field)
			}
		}
		// A taken name and the master's own name are field errors too.
		if _, err := e.m.Nodes().Create(e.ctx, good); !isFieldErrors(err, "name") {
			t.Errorf("duplicate CreateNode = %v, want FieldErrors on name", err)
		}
		mc := good
		mc.Name = masterName
		if _, err := e.m.Nodes().Create(e.ctx, mc); !isFieldErrors(err, "name") {
			t.Errorf("CreateNode with the master's name = %v, want FieldErrors on name", err)
		}
		if e.countNodes() != 1 {
			t.Errorf("%d nodes after refused creates, want 1", e.countNodes())
		}
		if after := e.snapshot("w1"); after != before {
			t.Errorf("refused edits changed the node:\n%s\n%s", before, after)
		}
		// UpdateNode ignores the name in the body: the path names the node.
		c := good
		c.Name, c.Priority = "renamed", 9
		if _, err := e.m.Nodes().Update(e.ctx, "w1", c); err != nil {
			t.Fatalf("UpdateNode: %v", err)
		}
		if n := e.node("w1"); n.Priority != 9 {
			t.Errorf("priority = %d, want 9", n.Priority)
		}
		if e.countNodes() != 1 {
			t.Error("UpdateNode created or renamed a node")
		}
	})
}

func TestWorkerDown(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		down := func(label, name string, act func() error) {
			t.Helper()
			before := e.snapshot(name)
			err := act()
			if !errors.Is(err, master.ErrWorker) {
				t.Errorf("%s: error = %v, want ErrWorker", label, err)
			} else if !strings.Contains(err.Error(), name) {
				t.Errorf("%s: error %q does not name the node", label, err)
			}
			if after := e.snapshot(name); after != before {
				t.Errorf("%s changed the node:\nbefore %s\nafter  %s", label, before, after)
			}
		}

		// Connect to a node whose worker is gone.
		a := startWorker(t, "wa")
		e.create(a)
		a.Srv.Close()
		down("Connect to a closed worker", "wa", func() error { _, err := e.m.Nodes().Connect(e.ctx, "wa"); return err })

		// Enable a connected node whose worker then went away.
		b := startWorker(t, "wb")
		e.create(b)
		e.connect("wb")
		b.Srv.Close()
		down("Enable on a closed worker", "wb", func() error { _, err := e.m.Nodes().Enable(e.ctx, "wb"); return err })
		if n := e.node("wb"); n.Status != store.StatusIdle {
			t.Errorf("wb status = %d, want idle", n.Status)
		}

		// Disable a running node whose worker answers 500.
		c := startWorker(t, "wc")
		e.create(c)
		e.connect("wc")
		e.enable("wc")
		c.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, `{"error":"disk full"}`, http.StatusInternalServerError)
		}))
		down("Disable on a failing worker", "wc", func() error { _, err := e.m.Nodes().Disable(e.ctx, "wc"); return err })
		if _, err := e.m.Nodes().Disable(e.ctx, "wc"); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("the worker's own error is not passed on: %v", err)
		}

		// A worker that refuses the handshake: another cluster key, another master.
		d := startWorker(t, "wd", func(c *worker.Config) { c.ClusterKey = "some-other-key" })
		e.create(d)
		down("Connect with a wrong cluster key", "wd", func() error { _, err := e.m.Nodes().Connect(e.ctx, "wd"); return err })
		f := startWorker(t, "wf", func(c *worker.Config) { c.WorkerOf = "other-master" })
		e.create(f)
		down("Connect to another master's worker", "wf", func() error { _, err := e.m.Nodes().Connect(e.ctx, "wf"); return err })
		if f.W.Health().Status != protocol.StateWaiting {
			t.Error("a worker of another master accepted the connection")
		}
	})
}

// TestConcurrentEnable: two admins press Enable at once.
func TestConcurrentEnable(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Run("same master", func(t *testing.T) {
			e := newEnv(t, s)
			tw := startWorker(t, "w1")
			e.create(tw)
			e.connect("w1")
			// Within one master, actions on a node are serialised: the loser is
			// refused before it calls the worker.
			var startups atomic.Int32
			router := tw.Router()
			tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if r.URL.Path == protocol.PathStartup || r.URL.Path == protocol.PathStartupPart {
					startups.Add(1)
				}
				router.ServeHTTP(rw, r)
			}))
			checkOneWins(t, e, "w1", func() error { _, err := e.m.Nodes().Enable(e.ctx, "w1"); return err },
				func() error { _, err := e.m.Nodes().Enable(e.ctx, "w1"); return err })
			if n := startups.Load(); n != 1 {
				t.Errorf("%d startups reached the worker, want 1", n)
			}
		})
		t.Run("two masters on one database", func(t *testing.T) {
			// Two master processes do not share the in-process lock: the conditional
			// update alone must make one of them lose. Both startups are held until
			// both have arrived, so both passed their status check before either writes.
			e := newEnv(t, s)
			m2 := newMaster(t, s)
			tw := startWorker(t, "w2")
			e.create(tw)
			e.connect("w2")
			var arrived atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			router := tw.Router()
			tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if r.URL.Path == protocol.PathStartup || r.URL.Path == protocol.PathStartupPart {
					if arrived.Add(1) >= 2 {
						once.Do(func() { close(release) })
					}
					select {
					case <-release:
					case <-time.After(5 * time.Second):
					}
				}
				router.ServeHTTP(rw, r)
			}))
			checkOneWins(t, e, "w2", func() error { _, err := e.m.Nodes().Enable(e.ctx, "w2"); return err },
				func() error { _, err := m2.Nodes().Enable(e.ctx, "w2"); return err })
			if arrived.Load() != 2 {
				t.Errorf("%d startups reached the worker, want 2 (both masters passed their check)", arrived.Load())
			}
		})
	})
}

func checkOneWins(t *testing.T, e *env, name string, a, b func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	start := make(chan struct{})
	for i, f := range []func() error{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f()
		}()
	}
	close(start)
	wg.Wait()
	ok, state := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, master.ErrState):
			state++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || state != 1 {
		t.Errorf("results %v: want exactly one success and one ErrState", errs)
	}
	if n := e.node(name); n.Status != store.StatusRunning || n.DesiredStatus != store.StatusRunning {
		t.Errorf("final node = %+v, want running", n)
	}
}
