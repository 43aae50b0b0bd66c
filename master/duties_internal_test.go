package master

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The duties are services: each is tested on its own, with a real store.

func TestPeriodicRunsReschedulesAndStops(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	p := newPeriodic("test", time.Hour, 0, func() { n.Add(1) }, storetest.Discard())
	p.Stop() // before Start: nothing to do
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, 5*time.Second, func() bool { return n.Load() == 1 }, "the first pass runs at once")
	p.Reschedule(20 * time.Millisecond)
	storetest.Eventually(t, 5*time.Second, func() bool { return n.Load() >= 4 }, "passes follow the new interval")
	p.Stop()
	after := n.Load()
	p.Stop() // twice: fine
	p.Reschedule(time.Millisecond)
	time.Sleep(100 * time.Millisecond) // a stopped duty must stay quiet: nothing to poll for
	if n.Load() != after {
		t.Fatalf("%d passes after Stop", n.Load()-after)
	}
}

func TestPeriodicFirstPassWaits(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	p := newPeriodic("test", 10*time.Millisecond, time.Hour, func() { n.Add(1) }, storetest.Discard())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	time.Sleep(100 * time.Millisecond) // ten intervals: the first pass is an hour away
	if n.Load() != 0 {
		t.Fatalf("%d passes before the first pass was due", n.Load())
	}
}

func TestRetentionPurgesOnlyOldRunsAndOnlyAsLeader(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		task := "t-" + storetest.RandomHex(t, 6)
		now := time.Now().UTC().Truncate(time.Second)
		var runs []store.Run
		for i := range 5 {
			age := time.Duration(i) * 24 * time.Hour * 10 // 0, 10, 20, 30, 40 days old
			runs = append(runs, store.Run{ID: fmt.Sprintf("%s-%d", task, i), TaskID: task, Node: "w1", Result: store.ResultSuccess,
				ScheduledAt: now.Add(-age), StartedAt: now.Add(-age), EndedAt: now.Add(-age)})
		}
		if _, err := store.InsertRuns(ctx, s.Store.DB, runs); err != nil {
			t.Fatal(err)
		}
		leads := false
		r := &retention{db: s.Store.DB, log: storetest.Discard(), leads: func() bool { return leads }, days: func() int { return 15 }}
		left := func() int {
			_, total, err := store.ListRuns(ctx, s.Store.DB, task, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			return total
		}
		r.pass(ctx)
		if n := left(); n != 5 {
			t.Fatalf("a master that does not lead pruned: %d runs left, want 5", n)
		}
		leads = true
		r.pass(ctx)
		if n := left(); n != 2 {
			t.Fatalf("%d runs left, want the 2 younger than 15 days", n)
		}
	})
}

func TestLeaseKeeperElectsOneReleasesOnStopAndReportsClash(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t).Store
	ctx := storetest.Ctx(t)
	events := &eventLog{db: s.DB, master: "m1", log: storetest.Discard(), life: newLifecycle()}
	// A lease lasts three intervals (3 s): m1's cannot lapse under a loaded
	// machine between the starts; m2 takes over within an interval of m1's
	// release.
	keeper := func(name string, elected func()) *leaseKeeper {
		return newLeaseKeeper(leaseConfig{DB: s.DB, Identity: name, Host: "127.0.0.1:1", BootID: name + "-boot",
			Log: storetest.Discard(), Events: events, Interval: func() time.Duration { return time.Second }, Elected: elected})
	}
	var m2Elected atomic.Int64
	m1, m2 := keeper("m1", nil), keeper("m2", func() { m2Elected.Add(1) })
	if won, err := m1.Start(ctx, true); err != nil || !won {
		t.Fatalf("m1 on an empty cluster: elected %v, err %v", won, err)
	}
	if won, err := m2.Start(ctx, true); err != nil || won {
		t.Fatalf("m2 while m1 leads: elected %v, err %v", won, err)
	}
	defer m2.Stop(ctx)
	if m1.fence() == nil || m2.fence() != nil {
		t.Fatal("fences: want m1's only")
	}
	if h, err := m1.holder(ctx); err != nil || h != "m1" {
		t.Fatalf("holder %q, %v", h, err)
	}
	m1.Stop(ctx) // releases: m2 takes over at its next tick
	if m1.epoch() != 0 {
		t.Fatal("m1 still leads after Stop")
	}
	storetest.Eventually(t, 10*time.Second, func() bool { return m2.epoch() > 0 && m2Elected.Load() == 1 }, "m2 elected after m1 stopped")

	// A worker holding the name: the master serves without a node row and says why.
	if err := store.CreateNode(ctx, s.DB, &store.Node{Name: "taken", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:2", Mode: store.ModeManual}); err != nil {
		t.Fatal(err)
	}
	m3 := keeper("taken", nil)
	if err := m3.registerSelf(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m3.ready(ctx, s.DB.PingContext); KindOf(err) != KindState {
		t.Fatalf("ready with a clash: %v, want a state refusal", err)
	}
}
