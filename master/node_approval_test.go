package master_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

func newcomer(name string, priority int) protocol.RegisterRequest {
	return protocol.RegisterRequest{
		Node:   protocol.NodeConfig{Name: name, Protocol: "http", Host: "127.0.0.1:30001", Priority: priority, MaxConcurrency: 5},
		Secret: protocol.NewSecret(), BootID: protocol.NewNonce(), MachineName: "box",
	}
}

func eventsOf(t *testing.T, e *env, action string) []store.Event {
	t.Helper()
	evs, _, err := e.m.Reads().ListEvents(e.ctx, store.EventFilter{Action: action, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A machine that declares priority 1000 for itself gets the default; only
// an admin raises it, and a re-registration keeps the admin's value. Every
// new name is an event with the address it came from.
func TestSelfDeclaredPriorityIsCapped(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		h, body := signedRegistration(t, clusterKey, newcomer("greedy", protocol.MaxPriority), time.Now())
		h.RemoteAddr = "192.0.2.77"
		if _, err := e.m.Register(e.ctx, h, body); err != nil {
			t.Fatal(err)
		}
		if n := e.node("greedy"); n.Priority != protocol.DefaultPriority {
			t.Fatalf("self-declared priority %d stored as %d, want %d", protocol.MaxPriority, n.Priority, protocol.DefaultPriority)
		}
		evs := eventsOf(t, e, "node.register")
		if len(evs) != 1 || !strings.Contains(evs[0].Detail, "new name from 192.0.2.77") {
			t.Fatalf("registration events %+v, want one naming the new name's address", evs)
		}
		// The admin raises it; the machine's next registration keeps it.
		if _, err := s.Store.DB.NewUpdate().Model((*store.Node)(nil)).Set("priority = 50").Where("name = ?", "greedy").Exec(e.ctx); err != nil {
			t.Fatal(err)
		}
		req := newcomer("greedy", protocol.MaxPriority)
		h2, body2 := signedRegistration(t, clusterKey, req, time.Now())
		if _, err := e.m.Register(e.ctx, h2, body2); err == nil {
			t.Fatal("another machine's key took the name")
		}
		if n := e.node("greedy"); n.Priority != 50 {
			t.Fatalf("priority after a refused registration %d, want 50", n.Priority)
		}
	})
}

// Automatic failover picks break priority ties in favour of the node that
// has served longest, not by name.
func TestFailoverTiesGoToTheSenior(t *testing.T) {
	t.Parallel()
	now := time.Now()
	got := master.RankFailover([]master.Candidate{
		{Name: "a-newcomer", Weight: 1, Since: now},
		{Name: "z-veteran", Weight: 1, Since: now.Add(-time.Hour)},
		{Name: "m-high", Weight: 5, Since: now},
	})
	if got[0].Name != "m-high" || got[1].Name != "z-veteran" || got[2].Name != "a-newcomer" {
		t.Fatalf("order %v, want m-high, z-veteran, a-newcomer", got)
	}
}

// With approval on, a new name waits with no secret, no task and no state
// change until an admin approves it; then the worker's retries let it in.
func TestNewNodesWaitForApproval(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		set, _ := e.m.Settings()
		set.ApproveNewNodes = true
		if err := e.m.UpdateSettings(e.ctx, set); err != nil {
			t.Fatal(err)
		}
		url := e.serveMaster()
		tw := startWorker(t, "pend1", autoCfg(url), func(c *worker.Config) { c.Priority = protocol.MaxPriority })
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		go func() { tw.W.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })

		storetest.Eventually(t, 10*time.Second, func() bool {
			n, err := store.GetNode(e.ctx, s.Store.DB, "pend1")
			return err == nil && n.Mode == store.ModePending
		}, "the new name never appeared pending")
		n := e.node("pend1")
		if n.Status != store.StatusOffline || n.Secret != "" || n.Priority != protocol.DefaultPriority {
			t.Fatalf("pending node %+v: want offline, no secret, default priority", n)
		}
		if _, err := e.m.Authenticate(e.ctx, "pend1", ""); !errors.Is(err, master.ErrUnauthorized) {
			t.Fatalf("a pending node authenticated: %v", err)
		}
		if _, err := e.m.Nodes().Enable(e.ctx, "pend1"); !errors.Is(err, master.ErrState) {
			t.Fatalf("Enable of a pending node = %v, want a state refusal", err)
		}
		if _, err := e.m.Nodes().Connect(e.ctx, "pend1"); !errors.Is(err, master.ErrState) {
			t.Fatalf("Connect of a pending node = %v, want a state refusal", err)
		}
		if got := e.node("pend1"); got.Mode != store.ModePending || got.Status != store.StatusOffline {
			t.Fatalf("pending node changed by itself: %+v", got)
		}
		if _, err := e.m.Nodes().Approve(e.ctx, "nobody"); !errors.Is(err, master.ErrNotFound) {
			t.Fatalf("approve unknown = %v, want not found", err)
		}
		for range 2 { // twice: the second is a no-op, not an error
			if _, err := e.m.Nodes().Approve(master.WithActor(e.ctx, "alice"), "pend1"); err != nil {
				t.Fatal(err)
			}
		}
		if evs := eventsOf(t, e, "node.approve"); len(evs) != 1 || evs[0].Actor != "alice" {
			t.Fatalf("approve events %+v, want one by alice", evs)
		}
		storetest.Eventually(t, 40*time.Second, func() bool {
			n, err := store.GetNode(e.ctx, s.Store.DB, "pend1")
			return err == nil && n.Status == store.StatusRunning
		}, "the approved node never registered")
		n = e.node("pend1")
		if n.Mode != store.ModeAuto || !tw.W.CheckSecret(n.Secret) || n.Priority != protocol.DefaultPriority {
			t.Fatalf("approved node %+v", n)
		}
	})
}

// New names are rate-limited per master and, with approval on, the pending
// ones are capped; each refusal says which limit.
func TestRegistrationOfNewNamesIsBounded(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	e := newEnv(t, s)
	e.addMasterNode()
	reg := func(name string) error {
		h, body := signedRegistration(t, clusterKey, newcomer(name, 1), time.Now())
		_, err := e.m.Register(e.ctx, h, body)
		return err
	}
	for i := range master.MaxNewNamesPerMinute {
		if err := reg(fmt.Sprintf("burst-%d", i)); err != nil {
			t.Fatalf("new name %d: %v", i, err)
		}
	}
	err := reg("burst-over")
	if master.KindOf(err) != master.KindLimited || master.RetryAfter(err) <= 0 || !strings.Contains(master.Message(err), "per minute") {
		t.Fatalf("name over the rate = %v, want a rate refusal with RetryAfter", err)
	}
	if _, gerr := store.GetNode(e.ctx, s.Store.DB, "burst-over"); !errors.Is(gerr, store.ErrNotFound) {
		t.Fatal("a refused name was stored")
	}
	// Known names re-register freely.
	if err := reg("burst-0"); err == nil || master.KindOf(err) == master.KindLimited {
		t.Fatalf("a known name (another key) = %v, want the key refusal, not the rate", err)
	}

	// The pending cap, on a second master (its own rate) with approval on.
	m2 := newMaster(t, s, func(c *master.Config) { c.Identity = "master-b" })
	set, _ := m2.Settings()
	set.ApproveNewNodes = true
	if err := m2.UpdateSettings(e.ctx, set); err != nil {
		t.Fatal(err)
	}
	for i := range master.MaxPendingNodes {
		if _, err := s.Store.DB.NewInsert().Model(&store.Node{Name: fmt.Sprintf("p-%d", i), Type: store.TypeWorker, Mode: store.ModePending,
			Protocol: "http", Host: "127.0.0.1:1", MaxConcurrency: 1, CreatedAt: time.Now(), UpdatedAt: time.Now()}).Exec(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, body := signedRegistration(t, clusterKey, newcomer("one-too-many", 1), time.Now())
	_, err = m2.Register(e.ctx, h, body)
	if !errors.Is(err, master.ErrState) || !strings.Contains(master.Message(err), "wait for approval (the maximum)") {
		t.Fatalf("registration over the pending cap = %v", err)
	}
}

// Pending nodes that are never approved are deleted after PendingNodeTTL.
func TestPendingNodesArePruned(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	e := newEnv(t, s)
	old := time.Now().Add(-master.PendingNodeTTL - time.Minute)
	for name, at := range map[string]time.Time{"stale": old, "fresh": time.Now()} {
		if _, err := s.Store.DB.NewInsert().Model(&store.Node{Name: name, Type: store.TypeWorker, Mode: store.ModePending,
			Protocol: "http", Host: "127.0.0.1:1", MaxConcurrency: 1, CreatedAt: at, UpdatedAt: at}).Exec(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	names, err := store.PrunePendingNodes(e.ctx, s.Store.DB, time.Now().Add(-master.PendingNodeTTL))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "stale" {
		t.Fatalf("pruned %v, want [stale]", names)
	}
	if _, err := store.GetNode(e.ctx, s.Store.DB, "fresh"); err != nil {
		t.Fatalf("the fresh pending node went: %v", err)
	}
}

// A worker cannot take a master's name, in any case; a master whose name a
// worker took first still starts and says why, and takes its row once the
// worker node is deleted.
func TestWorkerAndMasterNamesNeverClash(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		if err := e.m.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{masterName, strings.ToUpper(masterName)} {
			h, body := signedRegistration(t, clusterKey, newcomer(name, 1), time.Now())
			if _, err := e.m.Register(e.ctx, h, body); err == nil {
				t.Fatalf("a worker registered the master's name %q", name)
			}
		}
		// A second master whose identity a worker registered first.
		h, body := signedRegistration(t, clusterKey, newcomer("Master-C", 1), time.Now())
		if _, err := e.m.Register(e.ctx, h, body); err != nil {
			t.Fatal(err)
		}
		m3 := newMaster(t, s, func(c *master.Config) { c.Identity = "master-c" })
		if err := m3.Start(e.ctx); err != nil {
			t.Fatalf("a master whose name a worker took did not start: %v", err)
		}
		err := m3.Ready(e.ctx)
		if err == nil || !strings.Contains(master.Message(err), "taken by worker node Master-C") {
			t.Fatalf("Ready = %v, want the clash explained", err)
		}
		if evs := eventsOf(t, e, "master.identity_clash"); len(evs) != 1 {
			t.Fatalf("clash events %+v, want one", evs)
		}
		// The admin deletes the worker node: the master takes its row.
		if _, err := s.Store.DB.NewUpdate().Model((*store.Node)(nil)).Set("status = ?", store.StatusOffline).Where("name = ?", "Master-C").Exec(e.ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Nodes().Delete(e.ctx, "Master-C"); err != nil {
			t.Fatal(err)
		}
		storetest.Eventually(t, 20*time.Second, func() bool {
			n, err := store.GetNode(e.ctx, s.Store.DB, "master-c")
			return err == nil && n.Type == store.TypeMaster && m3.Ready(e.ctx) == nil
		}, "the master never took its row after the worker node went")
	})
}
