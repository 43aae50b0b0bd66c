package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Two masters given the same batch at once, a batch that meets a run stored
// already (a worker's retry after a timeout), round after round: on MySQL an
// INSERT that fails on a stored id keeps gap locks until its transaction
// ends, so two transactions that went on to insert the rest of the batch in
// the same transaction deadlocked (one rolled back and retried; a CI run saw
// it, and this test saw it in most of its runs before the fix). StoreRuns
// rolls back at once and looks the runs up first: no statement meets a
// deadlock, and every run is stored and counted once.
func TestStoreRunsSameBatchTwiceAtOnceNeverDeadlocks(t *testing.T) {
	t.Parallel()
	s := storetest.OpenMySQL(t)
	ctx, db := storetest.Ctx(t), s.Store.DB
	now := time.Now().UTC().Truncate(time.Millisecond)
	tk := store.Task{ID: "tr", Title: "t", Type: "http", Spec: "{}", Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now}
	if _, err := db.NewInsert().Model(&tk).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	dead := &storetest.DeadlockCounter{}
	db.AddQueryHook(dead)
	const rounds, size = 30, 40
	for round := range rounds {
		runs := func(from, to int) []store.Run {
			var out []store.Run
			for i := from; i <= to; i++ {
				at := now.Add(time.Duration(round*size+i) * time.Millisecond)
				out = append(out, store.Run{ID: fmt.Sprintf("race-%02d-%03d", round, i), TaskID: "tr", Node: "w1",
					ScheduledAt: at, StartedAt: at, EndedAt: at, Result: "success", Attempt: 1})
			}
			return out
		}
		// Stored already: one in the middle of the batch, so that the first
		// INSERT of each delivery inserts rows before failing on it.
		if _, err := store.StoreRuns(ctx, db, runs(size/2, size/2)); err != nil {
			t.Fatal(err)
		}
		batch := runs(1, size)
		var wg sync.WaitGroup
		fresh := make([][]store.Run, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				fresh[i], errs[i] = store.StoreRuns(ctx, db, batch)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, delivery %d: %v", round, i, err)
			}
		}
		if n := len(fresh[0]) + len(fresh[1]); n != size-1 {
			t.Fatalf("round %d: %d + %d runs new, want %d in all", round, len(fresh[0]), len(fresh[1]), size-1)
		}
	}
	if n := dead.N(); n != 0 {
		t.Fatalf("%d statements in %d rounds met a deadlock or lock wait timeout", n, rounds)
	}
	var got store.Task
	if err := db.NewSelect().Model(&got).Where("id = ?", "tr").Scan(ctx); err != nil || got.RunCount != rounds*size {
		t.Fatalf("run_count %d (%v), want %d", got.RunCount, err, rounds*size)
	}
}
