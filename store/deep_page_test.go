package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestDeepPagesAreTheSameRows: a page at a deep offset (read by its ids
// first) holds the rows of the same place in the whole list, in its order,
// with the filters applied, for tasks, delayed tasks, runs and events; past
// the end it is empty. Most rows share their creation instant (one batch),
// so the ties' order is tested too.
func TestDeepPagesAreTheSameRows(t *testing.T) {
	t.Parallel()
	const n = 1_230
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		tasks := make([]*store.Task, n)
		ds := make([]*store.DelayedTask, n)
		runs := make([]store.Run, n)
		evs := make([]store.Event, n)
		t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
		for i := range n {
			st := store.TaskRunning
			if i%3 == 0 {
				st = store.TaskStopped
			}
			tasks[i] = newTask(fmt.Sprintf("deep-%05d", i), fmt.Sprintf("deep %05d", i), st)
			ds[i] = newDelayed(delayedID(i+1), fmt.Sprint(i), t0.Add(2*time.Hour))
			res := "success"
			if i%4 == 0 {
				res = "failed"
			}
			at := t0.Add(time.Duration(i/10) * time.Second) // ten runs a second: ties
			runs[i] = store.Run{ID: fmt.Sprintf("run-%05d", i), TaskID: tasks[i%7].ID, Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at, Result: res, Attempt: 1}
			evs[i] = store.Event{At: at, Actor: fmt.Sprintf("actor-%d", i%2), Action: "test.deep", TargetType: "task", Target: fmt.Sprint(i), Outcome: "ok"}
		}
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := store.CreateTasks(ctx, tx, tasks); err != nil {
				return err
			}
			if _, _, err := store.CreateDelayedBatch(ctx, tx, ds); err != nil {
				return err
			}
			_, err := store.InsertRuns(ctx, tx, runs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.AddEvents(ctx, db, evs); err != nil {
			t.Fatal(err)
		}
		stopped := store.TaskStopped
		check := func(name string, list func(limit, offset int) ([]string, error)) {
			t.Helper()
			all, err := list(2*n, 0)
			if err != nil || len(all) == 0 {
				t.Fatalf("%s, whole list: %d rows, %v", name, len(all), err)
			}
			for _, off := range []int{999, 1000, 1001, len(all) - 3, len(all), len(all) + 50} {
				if off < 0 {
					continue
				}
				got, err := list(40, off)
				want := all[min(off, len(all)):min(off+40, len(all))]
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("%s at offset %d: %v, %v; want %v", name, off, got, err, want)
				}
			}
		}
		ids := func(f func(i int) string, n int) []string {
			out := make([]string, n)
			for i := range n {
				out[i] = f(i)
			}
			return out
		}
		check("tasks", func(limit, offset int) ([]string, error) {
			page, _, err := store.ListTasks(ctx, db, store.TaskFilter{Limit: limit, Offset: offset})
			return ids(func(i int) string { return page[i].ID }, len(page)), err
		})
		check("stopped tasks", func(limit, offset int) ([]string, error) {
			page, _, err := store.ListTasks(ctx, db, store.TaskFilter{Status: &stopped, Title: "deep 0", Limit: limit, Offset: offset})
			for _, tk := range page {
				if tk.Status != store.TaskStopped {
					return nil, fmt.Errorf("task %s is %v", tk.ID, tk.Status)
				}
			}
			return ids(func(i int) string { return page[i].ID }, len(page)), err
		})
		check("delayed", func(limit, offset int) ([]string, error) {
			page, _, err := store.ListDelayed(ctx, db, store.DelayedFilter{Status: store.DelayedPending, Limit: limit, Offset: offset})
			return ids(func(i int) string { return page[i].ID }, len(page)), err
		})
		check("runs", func(limit, offset int) ([]string, error) {
			page, _, err := store.QueryRuns(ctx, db, store.RunFilter{Limit: limit, Offset: offset, Preview: true})
			return ids(func(i int) string { return page[i].ID }, len(page)), err
		})
		check("failed runs", func(limit, offset int) ([]string, error) {
			page, _, err := store.QueryRuns(ctx, db, store.RunFilter{Result: "failed", Limit: limit, Offset: offset})
			return ids(func(i int) string { return page[i].ID }, len(page)), err
		})
		check("events", func(limit, offset int) ([]string, error) {
			page, _, err := store.ListEvents(ctx, db, store.EventFilter{Action: "test.deep", Limit: limit, Offset: offset})
			return ids(func(i int) string { return fmt.Sprint(page[i].ID) }, len(page)), err
		})
		check("events of one actor", func(limit, offset int) ([]string, error) {
			page, _, err := store.ListEvents(ctx, db, store.EventFilter{Actor: "actor-1", Limit: limit, Offset: offset})
			return ids(func(i int) string { return fmt.Sprint(page[i].ID) }, len(page)), err
		})
	})
}

// TestTaskTitleSearchIgnoresCase: a title search finds a substring in any
// ASCII case on every engine, and LIKE's wildcards in it are plain text.
func TestTaskTitleSearchIgnoresCase(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		// The last is as long as a title may be, in characters (4 bytes each).
		for i, title := range []string{"Billing Export", "other_job 100%", "otherXjob 1000", "Größe prüfen", strings.Repeat("任", 199) + "😀"} {
			if err := store.CreateTask(ctx, db, newTask(fmt.Sprintf("ts-%d", i), title, store.TaskStopped)); err != nil {
				t.Fatal(err)
			}
		}
		for search, want := range map[string][]string{
			"billing": {"ts-0"}, "EXPORT": {"ts-0"}, "g E": {"ts-0"},
			"r_j": {"ts-1"}, "100%": {"ts-1"}, "job 1": {"ts-2", "ts-1"},
			"größe": {"ts-3"}, "任任😀": {"ts-4"}, "nothing": nil,
		} {
			page, total, err := store.ListTasks(ctx, db, store.TaskFilter{Title: search})
			var got []string
			for _, tk := range page {
				got = append(got, tk.ID)
			}
			slices.Sort(got)
			slices.Sort(want)
			if err != nil || !slices.Equal(got, want) || total != len(want) {
				t.Errorf("title %q: %v (total %d), %v; want %v", search, got, total, err, want)
			}
		}
	})
}
