package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A run in progress (its start notice) is stored as running and not
// counted; its final report replaces it and is counted once, whether it
// comes in a later batch, in the same batch, or after the run was marked
// lost; a notice that arrives after the end changes nothing; marking lost
// touches only the runs in progress of that node.
func TestRunsInProgressAreReplacedByTheirEnd(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		now := time.Now().UTC().Truncate(time.Millisecond)
		task := store.Task{ID: "t1", Title: "t", Type: "shell", Spec: "{}", Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now}
		if _, err := db.NewInsert().Model(&task).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		insert := func(runs ...store.Run) []store.Run {
			t.Helper()
			var fresh []store.Run
			if err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				var err error
				fresh, err = store.InsertRuns(ctx, tx, runs)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return fresh
		}
		notice := func(id, node string) store.Run {
			return store.Run{ID: id, TaskID: "t1", Node: node, ScheduledAt: now, StartedAt: now, EndedAt: now,
				Result: store.ResultRunning, Attempt: 1}
		}
		end := func(id, node, result string) store.Run {
			code := 0
			return store.Run{ID: id, TaskID: "t1", Node: node, ScheduledAt: now, StartedAt: now, EndedAt: now.Add(3 * time.Second),
				DurationMS: 3000, Result: result, Attempt: 1, Output: "done", ExitCode: &code}
		}
		get := func(id string) *store.Run {
			t.Helper()
			r, err := store.GetRun(ctx, db, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		count := func() int64 {
			t.Helper()
			tk, err := store.GetTask(ctx, db, "t1")
			if err != nil {
				t.Fatal(err)
			}
			return tk.RunCount
		}

		// Notice, then its end in a later batch.
		if got := insert(notice("a", "w1")); len(got) != 1 || get("a").Result != store.ResultRunning || count() != 0 {
			t.Fatalf("notice: fresh %d, result %s, count %d; want stored as running, not counted", len(got), get("a").Result, count())
		}
		if got := insert(end("a", "w1", store.ResultSuccess), end("b", "w1", store.ResultSuccess)); len(got) != 2 {
			t.Fatalf("end of a + new b: %d fresh, want 2", len(got))
		}
		if r := get("a"); r.Result != store.ResultSuccess || r.Output != "done" || r.DurationMS != 3000 || r.ExitCode == nil || count() != 2 {
			t.Fatalf("a after its end: %+v, count %d; want success, counted with b (2)", r, count())
		}
		// A late notice of an ended run, and the same end again: nothing.
		if got := insert(notice("a", "w1"), end("b", "w1", store.ResultSuccess)); len(got) != 0 || get("a").Result != store.ResultSuccess || count() != 2 {
			t.Fatalf("late notice: %d fresh, a %s, count %d", len(got), get("a").Result, count())
		}
		// Notice and end in one batch: the end is kept.
		if got := insert(notice("c", "w1"), end("c", "w1", store.ResultKilled)); len(got) != 1 || get("c").Result != store.ResultKilled || count() != 3 {
			t.Fatalf("notice+end in one batch: %d fresh, c %s, count %d", len(got), get("c").Result, count())
		}

		// Another node (or another task) cannot end a run in progress on w1.
		insert(notice("f", "w1"))
		if got := insert(end("f", "w9", store.ResultSuccess)); len(got) != 0 || get("f").Result != store.ResultRunning || count() != 3 {
			t.Fatalf("end of w1's run sent by w9: %d fresh, f %s, count %d; want refused as a duplicate", len(got), get("f").Result, count())
		}
		other := end("f", "w1", store.ResultSuccess)
		other.TaskID = "t2"
		if got := insert(other); len(got) != 0 || get("f").Result != store.ResultRunning {
			t.Fatalf("end of f naming another task: %d fresh, f %s", len(got), get("f").Result)
		}
		if got := insert(end("f", "w1", store.ResultSuccess)); len(got) != 1 || count() != 4 {
			t.Fatalf("end of f by w1: %d fresh, count %d", len(got), count())
		}

		// Lost with its worker; only w1's runs in progress.
		insert(notice("d", "w1"), notice("e", "w2"))
		n, err := store.LoseRunsOf(ctx, db, "w1", "the worker went offline during this run")
		if err != nil || n != 1 {
			t.Fatalf("LoseRunsOf w1: %d, %v; want 1", n, err)
		}
		if r := get("d"); r.Result != store.ResultLost || r.Output == "" || !r.EndedAt.After(now.Add(-time.Second)) {
			t.Fatalf("d after LoseRunsOf: %+v", r)
		}
		if get("e").Result != store.ResultRunning || get("a").Result != store.ResultSuccess {
			t.Fatal("LoseRunsOf touched another node's run or an ended one")
		}
		// The worker was only cut off: its report still lands.
		if got := insert(end("d", "w1", store.ResultFailed)); len(got) != 1 || get("d").Result != store.ResultFailed || get("d").Output != "done" || count() != 5 {
			t.Fatalf("end after lost: %d fresh, d %s %q, count %d", len(got), get("d").Result, get("d").Output, count())
		}
	})
}

// A fire a node claimed, due, whose run it never reported (a run too short
// for a start notice, caught by a kill -9) is recorded lost under the run id
// its claim named when LoseRunsOf runs for that node; a fire reported, a fire
// not due yet, a claim without a run id and another node's claim are left
// alone; a second pass records nothing more; and the worker's report, should
// it come after all, replaces the lost run and is counted once.
func TestLoseRunsOfRecordsClaimedFiresNeverReported(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		now := time.Now().UTC().Truncate(time.Second)
		task := store.Task{ID: "t1", Title: "t", Type: "http", Spec: "{}", Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now}
		if _, err := db.NewInsert().Model(&task).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		claim := func(sec int, node, runID string) time.Time {
			t.Helper()
			fire := now.Add(time.Duration(sec) * time.Second)
			if w, err := store.ClaimFire(ctx, db, "t1", fire, node, runID); err != nil || w != node {
				t.Fatalf("claim of %s by %s: %q %v", fire, node, w, err)
			}
			return fire
		}
		report := func(id, node string, fire time.Time) []store.Run {
			t.Helper()
			fresh, err := store.StoreRuns(ctx, db, []store.Run{{ID: id, TaskID: "t1", Node: node, ScheduledAt: fire,
				StartedAt: fire, EndedAt: fire.Add(time.Millisecond), DurationMS: 1, Result: store.ResultSuccess, Attempt: 1, Output: "ok"}})
			if err != nil {
				t.Fatal(err)
			}
			return fresh
		}
		unreported := claim(-3, "w1", "run-unreported")
		reported := claim(-2, "w1", "run-reported")
		report("run-reported", "w1", reported)
		claim(-1, "w1", "")          // an older worker's claim: no run id
		claim(60, "w1", "run-ahead") // not due yet
		claim(-4, "w2", "run-of-w2") // another node's
		const why = "the worker went offline (failed health checks) during this run"

		n, err := store.LoseRunsOf(ctx, db, "w1", why)
		if err != nil || n != 1 {
			t.Fatalf("LoseRunsOf w1: %d, %v; want 1 (the unreported fire)", n, err)
		}
		r, err := store.GetRun(ctx, db, "run-unreported")
		if err != nil {
			t.Fatal(err)
		}
		if r.Result != store.ResultLost || r.Node != "w1" || r.TaskID != "t1" || !r.ScheduledAt.Equal(unreported) ||
			r.Attempt != 1 || !strings.Contains(r.Output, why) || !strings.Contains(r.Output, "unknown") {
			t.Fatalf("lost run of the unreported fire: %+v", r)
		}
		if got, _ := store.GetRun(ctx, db, "run-reported"); got == nil || got.Result != store.ResultSuccess {
			t.Fatalf("reported run after LoseRunsOf: %+v", got)
		}
		for _, id := range []string{"run-ahead", "run-of-w2"} {
			if _, err := store.GetRun(ctx, db, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("run %s: %v, want none recorded", id, err)
			}
		}
		if n, err := store.LoseRunsOf(ctx, db, "w1", why); err != nil || n != 0 {
			t.Fatalf("second LoseRunsOf: %d, %v; want nothing more", n, err)
		}

		// The worker was cut off, not dead: its report lands and replaces it.
		if fresh := report("run-unreported", "w1", unreported); len(fresh) != 1 {
			t.Fatalf("late report: %d fresh, want 1", len(fresh))
		}
		if r, _ := store.GetRun(ctx, db, "run-unreported"); r == nil || r.Result != store.ResultSuccess || r.Output != "ok" {
			t.Fatalf("after the late report: %+v", r)
		}
		tk, err := store.GetTask(ctx, db, "t1")
		if err != nil || tk.RunCount != 2 {
			t.Fatalf("run count %d (%v), want 2: the lost record is not counted, its report once", tk.RunCount, err)
		}
	})
}
