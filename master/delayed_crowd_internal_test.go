package master

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestCrowdLookaheadGrowsWithTheTasksDueTogether: a few tasks due together
// are claimed at the configured lookahead; a crowd early enough to claim it
// all at twice the measured claim cost, bounded; far-off tasks are not
// counted; the cost measure averages and the pokes of creations use the
// lookahead in force.
func TestCrowdLookaheadGrowsWithTheTasksDueTogether(t *testing.T) {
	t.Parallel()
	st := storetest.OpenSQLite(t).Store
	ctx := storetest.Ctx(t)
	m := New(Config{Identity: "m1", ClusterKey: "k"}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	svc := m.Delayed()
	cfg := svc.delayedCfg()
	due := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	add := func(from, n int, at time.Time) {
		t.Helper()
		rows := make([]*store.DelayedTask, n)
		for i := range rows {
			k := fmt.Sprint(from + i)
			key := store.DelayedPendingKey(store.DefaultProjectID, "app", "crowd", k)
			rows[i] = &store.DelayedTask{ID: fmt.Sprintf("%032x", from+i), ProjectID: store.DefaultProjectID, SourceApp: "app", Topic: "crowd",
				ContentKey: k, PendingKey: &key, Status: store.DelayedPending, DueAt: at, NextAt: at, NotifyURL: "http://127.0.0.1:1/",
				Executors: "[]", Keepers: "[]", CreatedBy: "t"}
		}
		if _, _, err := store.CreateDelayedBatch(ctx, st.DB, rows); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 10, due)
	if la := svc.crowdLookahead(ctx, cfg, due); la != cfg.Lookahead {
		t.Errorf("10 tasks due together: lookahead %s, want the configured %s", la, cfg.Lookahead)
	}
	// 2,000 more within a second of the first, 1,000 an hour later.
	add(10, 2000, due.Add(time.Second))
	add(5000, 1000, due.Add(time.Hour))
	svc.claimCost.Store(int64(5 * time.Millisecond))
	la := svc.crowdLookahead(ctx, cfg, due)
	if la != maxCrowdLookahead {
		t.Errorf("2,010 tasks due together at 5ms a claim: lookahead %s, want the bound %s", la, maxCrowdLookahead)
	}
	svc.claimCost.Store(int64(200 * time.Microsecond))
	if la = svc.crowdLookahead(ctx, cfg, due); la != 2010*400*time.Microsecond {
		t.Errorf("2,010 tasks due together at 200µs a claim: lookahead %s, want %s (twice the cost of each)", la, 2010*400*time.Microsecond)
	}
	if got := svc.currentLookahead(cfg); got != la {
		t.Errorf("lookahead in force %s, want %s", got, la)
	}
	// A task an hour away is not counted (nor the crowd looked for at all).
	if la := svc.crowdLookahead(ctx, cfg, due.Add(time.Hour)); la != cfg.Lookahead {
		t.Errorf("the next task an hour away: lookahead %s, want %s", la, cfg.Lookahead)
	}
	svc.claimCost.Store(0)
	svc.measureClaim(400*time.Millisecond, 1000)
	svc.measureClaim(800*time.Millisecond, 1000)
	if got := svc.claimCostNow(); got != 500*time.Microsecond {
		t.Errorf("claim cost after 400µs and 800µs a task: %s, want 500µs (a quarter weight for the newest)", got)
	}
}
