package master_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// clusterMaster is one more master on the store of s, called name.
func clusterMaster(t *testing.T, s storetest.NamedStore, name string, interval time.Duration) *master.Master {
	t.Helper()
	return newMaster(t, s, func(c *master.Config) {
		c.Identity = name
		c.Health.Interval, c.Health.Timeout = interval, interval/2
		c.Pinned = master.Pinned{HealthInterval: true, HealthTimeout: true}
	})
}

// leaders names the masters among ms that believe they lead.
func leaders(ms []*master.Master) []string {
	var out []string
	for _, m := range ms {
		if m.IsLeader() {
			out = append(out, m.Identity())
		}
	}
	return out
}

// waitOneLeader polls until exactly one of ms leads and returns it.
func waitOneLeader(t *testing.T, ms []*master.Master, within time.Duration) *master.Master {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var lead []*master.Master
		for _, m := range ms {
			if m.IsLeader() {
				lead = append(lead, m)
			}
		}
		if len(lead) == 1 {
			return lead[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single leader within %s: %v", within, leaders(ms))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaderLeaseFailover(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		const interval = 200 * time.Millisecond
		var ms []*master.Master
		for _, name := range []string{"m1", "m2", "m3"} {
			m := clusterMaster(t, s, name, interval)
			if err := m.Start(ctx); err != nil {
				t.Fatalf("Start(%s): %v", name, err)
			}
			ms = append(ms, m)
		}
		lead := waitOneLeader(t, ms, 5*time.Second)
		if got, err := ms[0].Leader(ctx); err != nil || got != lead.Identity() {
			t.Fatalf("Leader() = %q, %v; want %q", got, err, lead.Identity())
		}
		epoch := lead.LeaderEpoch()

		// /health tells which master leads.
		for _, m := range ms {
			h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: storetest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("/health of %s: %d %s", m.Identity(), rec.Code, rec.Body)
			}
			if body["leader"] != (m == lead) || body["node"] != m.Identity() {
				t.Errorf("/health of %s = %v; leader is %s", m.Identity(), body, lead.Identity())
			}
		}

		// A stopped leader is replaced within one lease plus one interval
		// (Stop releases the lease, so it is faster; the bound is what counts).
		lead.Stop(ctx)
		var rest []*master.Master
		for _, m := range ms {
			if m != lead {
				rest = append(rest, m)
			}
		}
		next := waitOneLeader(t, rest, 3*interval+interval+2*time.Second)
		if next.LeaderEpoch() <= epoch {
			t.Errorf("new leader epoch %d, old %d: the epoch must grow at a change of holder", next.LeaderEpoch(), epoch)
		}
		if n, err := store.GetNode(ctx, s.Store.DB, lead.Identity()); err != nil || n.Status != store.StatusOffline {
			t.Errorf("stopped master's node: %+v, %v", n, err)
		}
	})
}

func TestPausedLeaderFencedWritesChangeNothing(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		// A long interval: the old leader's own view of its lease stays valid
		// for the whole test, as a process paused and resumed would believe.
		old := clusterMaster(t, s, "old", 10*time.Second)
		next := clusterMaster(t, s, "next", 10*time.Second)
		dead := &store.Node{Name: "w-dead", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", BootID: "b", MaxConcurrency: 1}
		if err := store.UpsertRegisteredNode(ctx, s.Store.DB, dead); err != nil {
			t.Fatal(err)
		}
		if res := old.Sweep(ctx); res.Failed != 1 || !old.IsLeader() {
			t.Fatalf("first sweep as leader: %+v, leader %t", res, old.IsLeader())
		}
		// The old leader pauses past its lease: it expires and next takes over.
		if _, err := s.Store.DB.ExecContext(ctx, "UPDATE leases SET expires_at = ? WHERE name = ?",
			time.Now().Add(-time.Second).UTC(), store.ClusterLease); err != nil {
			t.Fatal(err)
		}
		if res := next.Sweep(ctx); res.Failed != 1 || !next.IsLeader() {
			t.Fatalf("sweep of the new leader: %+v, leader %t", res, next.IsLeader())
		}
		before := fmtNode(t, s, "w-dead")
		if n, _ := store.GetNode(ctx, s.Store.DB, "w-dead"); n.Failures != 2 {
			t.Fatalf("failures %d after two leaders' sweeps, want 2", n.Failures)
		}
		// The old leader resumes believing it leads: its writes are fenced out.
		if !old.IsLeader() {
			t.Fatal("the paused leader should still believe it leads")
		}
		old.Sweep(ctx)
		if after := fmtNode(t, s, "w-dead"); after != before {
			t.Errorf("a fenced sweep changed the node:\n before %s\n after  %s", before, after)
		}
		l, err := store.GetLease(ctx, s.Store.DB, store.ClusterLease)
		if err != nil || l.Holder != "next" {
			t.Errorf("lease after the old leader resumed: %+v, %v", l, err)
		}
	})
}

func fmtNode(t *testing.T, s storetest.NamedStore, name string) string {
	t.Helper()
	n, err := store.GetNode(context.Background(), s.Store.DB, name)
	if err != nil {
		t.Fatal(err)
	}
	n.UpdatedAt = time.Time{}
	b, _ := json.Marshal(n)
	return string(b)
}

func TestMasterHeartbeatAndStaleMasterOffline(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		const interval = 200 * time.Millisecond
		// A master that died without a word an hour ago.
		ghost := &store.Node{Name: "ghost", Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", BootID: "gone", MaxConcurrency: 1}
		if err := store.UpsertRegisteredNode(ctx, s.Store.DB, ghost); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Store.DB.ExecContext(ctx, "UPDATE nodes SET last_seen = ? WHERE name = ?",
			time.Now().Add(-time.Hour).UTC(), "ghost"); err != nil {
			t.Fatal(err)
		}
		ms := []*master.Master{clusterMaster(t, s, "m1", interval), clusterMaster(t, s, "m2", interval)}
		for _, m := range ms {
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		started := time.Now()
		deadline := started.Add(10 * time.Second)
		for {
			g, err := store.GetNode(ctx, s.Store.DB, "ghost")
			if err != nil {
				t.Fatal(err)
			}
			m1, _ := store.GetNode(ctx, s.Store.DB, "m1")
			m2, _ := store.GetNode(ctx, s.Store.DB, "m2")
			if g.Status == store.StatusOffline && m1.LastSeen.After(started) && m2.LastSeen.After(started) {
				if !strings.HasPrefix(g.Reason, "master heartbeat stale since ") {
					t.Errorf("stale master reason %q", g.Reason)
				}
				if m1.Status != store.StatusRunning || m2.Status != store.StatusRunning {
					t.Errorf("live masters: %v %v", m1.Status, m2.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ghost %+v; m1 seen %s, m2 seen %s (started %s)", g, m1.LastSeen, m2.LastSeen, started)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestMasterIdentityHeldByLiveMasterRefused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		first := clusterMaster(t, s, "dup", time.Second)
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		err := clusterMaster(t, s, "dup", time.Second).Start(ctx)
		if s.Name == string(store.SQLite) {
			// One master per SQLite file (the binary's lock file): a fresh row is
			// a killed predecessor, and a restart must not wait for it.
			if err != nil {
				t.Fatalf("restart on SQLite: %v", err)
			}
		} else if !errors.Is(err, master.ErrIdentityInUse) || !strings.Contains(err.Error(), "--identity") {
			t.Fatalf("second master with a live identity: %v, want ErrIdentityInUse", err)
		}
		first.Stop(ctx)
		if err := clusterMaster(t, s, "dup", time.Second).Start(ctx); err != nil {
			t.Fatalf("start after the holder stopped: %v", err)
		}
	})
}
