package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// InsertRuns over a batch bigger than one statement in rows, in output bytes
// and in tasks, part of which is stored already and which repeats ids: only
// the new runs are stored and returned (in the order given), and every
// task's counters add exactly those.
func TestInsertRunsBatchesPartlyStored(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		const tasks = 700 // more than one counter statement
		now := time.Now().UTC().Truncate(time.Millisecond)
		var rows []store.Task
		for i := 0; i < tasks; i++ {
			rows = append(rows, store.Task{ID: fmt.Sprintf("t%04d", i), Title: "t", Type: "http", Spec: "{}",
				Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now})
		}
		if _, err := db.NewInsert().Model(&rows).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		big := strings.Repeat("x", 60<<10)
		run := func(i int) store.Run {
			at := now.Add(-time.Duration(i) * time.Millisecond)
			r := store.Run{ID: fmt.Sprintf("r%05d", i), TaskID: fmt.Sprintf("t%04d", i%tasks), Node: "w1",
				ScheduledAt: at, StartedAt: at, EndedAt: at, Result: "success", Attempt: 1, Output: "ok"}
			if i%10 == 0 {
				r.Output = big // 120 of these: 7 MiB, more than one statement
			}
			if i%tasks == 3 {
				r.Result = "failed" // the newest run of t0003 (i = 3) failed
			}
			return r
		}
		var first []store.Run
		for i := 0; i < 300; i++ {
			first = append(first, run(i))
		}
		if err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			got, err := store.InsertRuns(ctx, tx, first)
			if err == nil && len(got) != len(first) {
				err = fmt.Errorf("first batch: %d fresh, want %d", len(got), len(first))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// 1,200 runs, the first 300 stored already, 50 given twice.
		var second []store.Run
		for i := 1199; i >= 0; i-- {
			second = append(second, run(i))
			if i%24 == 0 {
				second = append(second, run(i))
			}
		}
		var fresh []store.Run
		if err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var err error
			fresh, err = store.InsertRuns(ctx, tx, second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(fresh) != 900 {
			t.Fatalf("second batch: %d fresh, want 900", len(fresh))
		}
		for k, r := range fresh {
			if want := fmt.Sprintf("r%05d", 1199-k); r.ID != want {
				t.Fatalf("fresh[%d] = %s, want %s (the order given)", k, r.ID, want)
			}
		}
		if n, err := db.NewSelect().Model((*store.Run)(nil)).Count(ctx); err != nil || n != 1200 {
			t.Fatalf("runs stored %d %v, want 1200", n, err)
		}
		var stored store.Run
		if err := db.NewSelect().Model(&stored).Where("id = ?", "r01190").Scan(ctx); err != nil || stored.Output != big {
			t.Fatalf("big output stored: %d bytes, %v", len(stored.Output), err)
		}
		var got []store.Task
		if err := db.NewSelect().Model(&got).Order("id").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		for i, tk := range got {
			// Runs i, i+700 (when < 1200): the newest is i's.
			want := int64(1)
			if i+tasks < 1200 {
				want = 2
			}
			if tk.RunCount != want {
				t.Errorf("%s: run_count %d, want %d", tk.ID, tk.RunCount, want)
			}
			last := now.Add(-time.Duration(i) * time.Millisecond)
			if !tk.LastRunAt.Equal(last) {
				t.Errorf("%s: last_run_at %s, want %s", tk.ID, tk.LastRunAt, last)
			}
			wantResult := "success"
			if i == 3 {
				wantResult = "failed"
			}
			if tk.LastResult != wantResult {
				t.Errorf("%s: last_result %q, want %q", tk.ID, tk.LastResult, wantResult)
			}
		}
		// An older run counts but moves neither the last run nor its result.
		old := run(5)
		old.ID, old.StartedAt, old.Result = "older", now.Add(-time.Hour), "failed"
		if _, err := store.InsertRuns(ctx, db, []store.Run{old}); err != nil {
			t.Fatal(err)
		}
		var t5 store.Task
		if err := db.NewSelect().Model(&t5).Where("id = ?", "t0005").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if t5.RunCount != 3 || t5.LastResult != "success" || !t5.LastRunAt.Equal(now.Add(-5*time.Millisecond)) {
			t.Errorf("after an older run: %d %q %s", t5.RunCount, t5.LastResult, t5.LastRunAt)
		}
	})
}

// An exit code is stored as given, a missing one as NULL.
func TestInsertRunsKeepsExitCodes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		now := time.Now().UTC()
		tk := store.Task{ID: "t", Title: "t", Type: "shell", Spec: "{}", Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now}
		if _, err := db.NewInsert().Model(&tk).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		code := 3
		runs := []store.Run{
			{ID: "with", TaskID: "t", Node: "w", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "failed", Attempt: 1, ExitCode: &code},
			{ID: "without", TaskID: "t", Node: "w", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "success", Attempt: 1},
		}
		if _, err := store.InsertRuns(ctx, db, runs); err != nil {
			t.Fatal(err)
		}
		with, err := store.GetRun(ctx, db, "with")
		if err != nil || with.ExitCode == nil || *with.ExitCode != 3 {
			t.Errorf("exit code 3 stored as %v (%v)", with, err)
		}
		without, err := store.GetRun(ctx, db, "without")
		if err != nil || without.ExitCode != nil {
			t.Errorf("no exit code stored as %v (%v)", without, err)
		}
	})
}

// The insert modes on a batch that meets stored ids: InsertOrConflict gives
// ErrConflict and, its transaction rolled back, changes nothing;
// LookUpThenInsert stores only the new runs and counts them once; both insert
// a batch of new runs whole.
func TestInsertRunsModesWithStoredIDs(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		now := time.Now().UTC().Truncate(time.Millisecond)
		tk := store.Task{ID: "tm", Title: "t", Type: "http", Spec: "{}", Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now}
		if _, err := db.NewInsert().Model(&tk).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		runs := func(ids ...int) []store.Run {
			var out []store.Run
			for _, i := range ids {
				at := now.Add(time.Duration(i) * time.Second)
				out = append(out, store.Run{ID: fmt.Sprintf("m%02d", i), TaskID: "tm", Node: "w1",
					ScheduledAt: at, StartedAt: at, EndedAt: at, Result: "success", Attempt: 1})
			}
			return out
		}
		insert := func(mode store.RunInsertMode, batch []store.Run) ([]store.Run, error) {
			var fresh []store.Run
			err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				var err error
				fresh, err = store.InsertRunsMode(ctx, tx, batch, mode)
				return err
			})
			return fresh, err
		}
		check := func(step string, want int) {
			t.Helper()
			n, err := db.NewSelect().Model((*store.Run)(nil)).Count(ctx)
			var got store.Task
			if err == nil {
				err = db.NewSelect().Model(&got).Where("id = ?", "tm").Scan(ctx)
			}
			if err != nil || n != int64(want) || got.RunCount != int64(want) {
				t.Fatalf("%s: %d runs stored, run_count %d (%v); want %d", step, n, got.RunCount, err, want)
			}
		}
		ids := func(rs []store.Run) string {
			var b strings.Builder
			for _, r := range rs {
				b.WriteString(r.ID + " ")
			}
			return b.String()
		}
		if fresh, err := insert(store.InsertOrConflict, runs(1, 2, 3)); err != nil || len(fresh) != 3 {
			t.Fatalf("new runs, InsertOrConflict: %s %v", ids(fresh), err)
		}
		check("after 3 new runs", 3)
		if fresh, err := insert(store.InsertOrConflict, runs(5, 2, 4, 3, 3)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stored ids met, InsertOrConflict: %s %v; want ErrConflict", ids(fresh), err)
		}
		check("after the conflict", 3)
		if fresh, err := insert(store.LookUpThenInsert, runs(5, 2, 4, 3, 3)); err != nil || ids(fresh) != "m05 m04 " {
			t.Fatalf("stored ids met, LookUpThenInsert: %q %v; want m05 m04", ids(fresh), err)
		}
		check("after the look-up", 5)
		if fresh, err := insert(store.LookUpThenInsert, runs(4, 5)); err != nil || len(fresh) != 0 {
			t.Fatalf("all stored, LookUpThenInsert: %s %v; want none", ids(fresh), err)
		}
		if fresh, err := insert(store.LookUpThenInsert, runs(6, 7)); err != nil || len(fresh) != 2 {
			t.Fatalf("new runs, LookUpThenInsert: %s %v", ids(fresh), err)
		}
		check("at the end", 7)
	})
}
