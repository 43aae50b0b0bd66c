package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestTaskVersionsStored: a task starts at version 1; an update names the
// version it replaces and fails when another came first; versions are
// listed newest first, read one by one, pruned to the newest N (but those
// kept on purpose) and deleted one by one, on every engine.
func TestTaskVersionsStored(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		tk := &store.Task{ID: "t1", Title: "t1", Type: "http", Spec: "{}", Keepers: "[]", Children: "[]"}
		if err := store.CreateTask(ctx, db, tk); err != nil {
			t.Fatal(err)
		}
		got, err := store.GetTask(ctx, db, "t1")
		if err != nil || got.Version != 1 {
			t.Fatalf("a new task: %v version %d", err, got.Version)
		}
		got.Title, got.Version = "t1 b", 2
		if err := store.UpdateTask(ctx, db, got, 1); err != nil {
			t.Fatal(err)
		}
		got.Title, got.Version = "t1 stale", 3
		if err := store.UpdateTask(ctx, db, got, 1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("an update from a version that is gone: %v", err)
		}
		if cur, _ := store.GetTask(ctx, db, "t1"); cur.Version != 2 || cur.Title != "t1 b" {
			t.Fatalf("after a refused update: %+v", cur)
		}
		var vs []store.TaskVersion
		for v := 1; v <= 7; v++ {
			vs = append(vs, store.TaskVersion{TaskID: "t1", Version: v, Title: "t1", Definition: `{"title":"t1"}`,
				CreatedBy: "admin", Via: "console", Note: strings.Repeat("n", v)})
		}
		if err := store.AddTaskVersions(ctx, db, vs); err != nil {
			t.Fatal(err)
		}
		list, err := store.TaskVersions(ctx, db, "t1", 0, 100)
		if err != nil || len(list) != 7 || list[0].Version != 7 || list[6].Version != 1 || list[0].CreatedAt.IsZero() {
			t.Fatalf("versions: %v %+v", err, list)
		}
		if v, err := store.GetTaskVersion(ctx, db, "t1", 3); err != nil || v.Note != "nnn" {
			t.Fatalf("version 3: %v %+v", err, v)
		}
		if _, err := store.GetTaskVersion(ctx, db, "t1", 99); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a version that does not exist: %v", err)
		}
		n, err := store.PruneTaskVersions(ctx, db, "t1", 3, []int{2})
		if err != nil || n != 3 {
			t.Fatalf("prune: %d %v, want 3 deleted", n, err)
		}
		list, _ = store.TaskVersions(ctx, db, "t1", 0, 100)
		var kept []int
		for _, v := range list {
			kept = append(kept, v.Version)
		}
		if len(kept) != 4 || kept[0] != 7 || kept[3] != 2 {
			t.Fatalf("kept after prune: %v, want 7 6 5 2", kept)
		}
		if err := store.DeleteTaskVersion(ctx, db, "t1", 7); err != nil {
			t.Fatal(err)
		}
		if list, _ = store.TaskVersions(ctx, db, "t1", 0, 100); len(list) != 3 || list[0].Version != 6 {
			t.Fatalf("after deleting version 7: %+v", list)
		}
	})
}
