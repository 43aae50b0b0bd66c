package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestListsCountUpToTheirLimit: a list's total stops at CountLimit (the
// page itself is whole), counts every match without one, and the page and
// the count agree on the filters.
func TestListsCountUpToTheirLimit(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		for i := range 30 {
			st := store.TaskRunning
			if i%3 == 0 {
				st = store.TaskPaused
			}
			tk := newTask(fmt.Sprintf("task-%02d", i), fmt.Sprintf("count %02d", i), st)
			if i%2 == 0 {
				tk.Executors = []string{"w1", "w2"}
			}
			if err := store.CreateTask(ctx, db, tk); err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(i+1), fmt.Sprint(i), time.Now().Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			if err := store.AddEvent(ctx, db, &store.Event{At: time.Now(), Actor: "counter", Action: "test.count", TargetType: "task", Target: fmt.Sprint(i), Outcome: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		running := store.TaskRunning
		for _, c := range []struct {
			limit, want int
			status      *store.TaskStatus
		}{{0, 30, nil}, {-1, 30, nil}, {10, 10, nil}, {30, 30, nil}, {31, 30, nil}, {10, 10, &running}, {0, 20, &running}} {
			page, total, err := store.ListTasks(ctx, db, store.TaskFilter{Status: c.status, Limit: 5, CountLimit: c.limit})
			if err != nil || total != c.want || len(page) != 5 {
				t.Errorf("tasks, limit %d: %d items, total %d, %v; want 5 items, total %d", c.limit, len(page), total, err, c.want)
			}
		}
		// By node: the page and the count agree (15 tasks name w1, 10 of
		// them running).
		for _, c := range []struct {
			limit, want int
			status      *store.TaskStatus
		}{{0, 15, nil}, {4, 4, nil}, {0, 10, &running}} {
			page, total, err := store.ListTasks(ctx, db, store.TaskFilter{Node: "w1", Status: c.status, Limit: 3, CountLimit: c.limit})
			if err != nil || total != c.want || len(page) != 3 || !slices.Contains(page[0].Executors, "w1") {
				t.Errorf("tasks of w1, limit %d: %d items, total %d, %v; want 3 of w1, total %d", c.limit, len(page), total, err, c.want)
			}
		}
		if page, total, err := store.ListDelayed(ctx, db, store.DelayedFilter{Status: store.DelayedPending, Limit: 10, CountLimit: 12}); err != nil || total != 12 || len(page) != 10 {
			t.Errorf("delayed: %d items, total %d, %v; want 10 items, total 12", len(page), total, err)
		}
		// A page that is not full tells the exact total by itself.
		if page, total, err := store.ListDelayed(ctx, db, store.DelayedFilter{Status: store.DelayedPending, Limit: 50, CountLimit: 12}); err != nil || total != 30 || len(page) != 30 {
			t.Errorf("delayed, one short page: %d items, total %d, %v; want 30 items, total 30", len(page), total, err)
		}
		if page, total, err := store.ListTasks(ctx, db, store.TaskFilter{Limit: 25, Offset: 20, CountLimit: 10}); err != nil || total != 30 || len(page) != 10 {
			t.Errorf("tasks, last page by offset: %d items, total %d, %v; want 10 items, total 30", len(page), total, err)
		}
		if page, total, err := store.ListTasks(ctx, db, store.TaskFilter{Limit: 5, Offset: 100}); err != nil || total != 30 || len(page) != 0 {
			t.Errorf("tasks, past the end: %d items, total %d, %v; want none of 30", len(page), total, err)
		}
		if page, total, err := store.ListEvents(ctx, db, store.EventFilter{Action: "test.", Limit: 4, CountLimit: 25}); err != nil || total != 25 || len(page) != 4 {
			t.Errorf("events: %d items, total %d, %v; want 4 items, total 25", len(page), total, err)
		}
		if _, total, err := store.ListEvents(ctx, db, store.EventFilter{Actor: "counter", Limit: 4}); err != nil || total != 30 {
			t.Errorf("events by actor, no limit: total %d, %v; want 30", total, err)
		}
	})
}
