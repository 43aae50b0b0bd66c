package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Who may report runs of which task: executors (also of deleted tasks) and
// grant holders; grants are pruned by age; node keys are reset by name.
func TestReportableTasksGrantsAndNodeKeys(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		for _, id := range []string{"t1", "t2", "t3"} {
			tk := &store.Task{ID: id, Title: id, Type: "http", Spec: "{}", Keepers: "[]", Children: "[]", Executors: []string{"w1"}}
			if id == "t2" {
				tk.Executors = []string{"w2"}
			}
			if err := store.CreateTask(ctx, db, tk); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.SetTaskStatus(ctx, db, "t3", []store.TaskStatus{store.TaskStopped}, store.TaskDeleted); err != nil {
			t.Fatal(err)
		}
		check := func(wantAllowed ...string) {
			t.Helper()
			exists, allowed, err := store.ReportableTasks(ctx, db, "w1", []string{"t1", "t2", "t3", "nope"})
			if err != nil {
				t.Fatal(err)
			}
			if !exists["t1"] || !exists["t2"] || !exists["t3"] || exists["nope"] {
				t.Errorf("exists = %v", exists)
			}
			if len(allowed) != len(wantAllowed) {
				t.Errorf("allowed = %v, want %v", allowed, wantAllowed)
			}
			for _, id := range wantAllowed {
				if !allowed[id] {
					t.Errorf("allowed = %v, want %v", allowed, wantAllowed)
				}
			}
		}
		check("t1", "t3")
		for range 2 { // a second grant refreshes the first
			if err := store.AddRunGrant(ctx, db, "t2", "w1"); err != nil {
				t.Fatal(err)
			}
		}
		check("t1", "t2", "t3")
		if n, err := store.DeleteRunGrantsBefore(ctx, db, time.Now().Add(time.Minute)); err != nil || n != 1 {
			t.Fatalf("prune = %d %v", n, err)
		}
		check("t1", "t3")

		n := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", MaxConcurrency: 1, Mode: store.ModeAuto, NodeKey: "abcd"}
		if err := store.CreateNode(ctx, db, n); err != nil {
			t.Fatal(err)
		}
		dup := *n
		dup.ID, dup.Name = 0, "W1"
		if err := store.CreateNode(ctx, db, &dup); !errors.Is(err, store.ErrDuplicate) {
			t.Errorf("W1 beside w1 = %v, want ErrDuplicate", err)
		}
		if got, err := store.GetNodeFold(ctx, db, "W1"); err != nil || got.Name != "w1" {
			t.Errorf("GetNodeFold(W1) = %v %v", got, err)
		}
		if err := store.UpdateRegisteredNode(ctx, db, &store.Node{Name: "w1", Host: "h:1", NodeKey: "ffff"}, "wrong"); !errors.Is(err, store.ErrConflict) {
			t.Errorf("update with a stale key = %v, want ErrConflict", err)
		}
		if err := store.ResetNodeKey(ctx, db, "w1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := store.GetNode(ctx, db, "w1"); got.NodeKey != "" {
			t.Errorf("key after reset = %q", got.NodeKey)
		}
		if err := store.ResetNodeKey(ctx, db, "ghost"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("reset of an unknown node = %v", err)
		}
	})
}
