package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestWorkflowFireAndQueueMoveOnce: masters racing to fire the same fire
// move it once (the fire's time read back from each engine finds the row),
// a due paused workflow is not listed, and racing starts of a queued run
// start it once with its steps.
func TestWorkflowFireAndQueueMoveOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		fire := time.Now().UTC().Add(-time.Second).Truncate(time.Second).Add(123456789 * time.Nanosecond)
		w := &store.Workflow{ID: "w1", ProjectID: store.DefaultProjectID, Title: "etl", Definition: "{}", NextFire: &fire}
		if err := store.CreateWorkflow(ctx, db, w); err != nil {
			t.Fatal(err)
		}
		due, err := store.DueWorkflows(ctx, db, time.Now(), 10)
		if err != nil || len(due) != 1 {
			t.Fatalf("due: %v %v", due, err)
		}
		next := fire.Add(time.Hour)
		won := race(t, func() (bool, error) { return store.MoveWorkflowFire(ctx, db, "w1", *due[0].NextFire, &next) })
		if won != 1 {
			t.Errorf("%d masters moved the fire, want 1", won)
		}
		back := fire
		if ok, err := store.MoveWorkflowFire(ctx, db, "w1", next, &back); err != nil || !ok {
			t.Fatalf("move back: %v %v", ok, err)
		}
		if ok, err := store.SetWorkflowPaused(ctx, db, "w1", true, &back); err != nil || !ok {
			t.Fatalf("pause: %v %v", ok, err)
		}
		if due, err := store.DueWorkflows(ctx, db, time.Now(), 10); err != nil || len(due) != 0 {
			t.Errorf("a paused workflow is due: %v %v", due, err)
		}
		run := &store.WorkflowRun{ID: "q1", WorkflowID: "w1", ProjectID: store.DefaultProjectID, Status: store.WorkflowQueued,
			LogicalTime: fire, Definition: "{}", Params: "{}"}
		if err := store.CreateWorkflowRun(ctx, db, run, nil); err != nil {
			t.Fatal(err)
		}
		won = race(t, func() (bool, error) {
			var ok bool
			err := store.RetryTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
				if err := store.LockRow(ctx, tx, "workflows", "w1"); err != nil {
					return err
				}
				var err error
				ok, err = store.StartQueuedRun(ctx, tx, "q1", []store.WorkflowStep{{Name: "a", TaskID: "t1"}})
				return err
			})
			return ok, err
		})
		if won != 1 {
			t.Errorf("%d masters started the queued run, want 1", won)
		}
		if _, steps, err := store.GetWorkflowRun(ctx, db, "q1"); err != nil || len(steps) != 1 || steps[0].State != store.StepPending {
			t.Errorf("started run's steps %+v (%v): want one pending", steps, err)
		}
		// The latest run of each workflow, in one query (a window function
		// on every engine).
		later := &store.WorkflowRun{ID: "q2", WorkflowID: "w1", ProjectID: store.DefaultProjectID, Status: store.WorkflowSkipped,
			LogicalTime: fire, Definition: "{}", Params: "{}"}
		if err := store.CreateWorkflowRun(ctx, db, later, nil); err != nil {
			t.Fatal(err)
		}
		last, err := store.LastWorkflowRuns(ctx, db, []string{"w1", "none"})
		if err != nil || len(last) != 1 || last["w1"].ID != "q2" || last["w1"].Status != store.WorkflowSkipped {
			t.Errorf("last runs %+v (%v): want q2 for w1", last, err)
		}
	})
}

// race runs try from 8 goroutines at once and counts those it says won.
func race(t *testing.T, try func() (bool, error)) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Go(func() {
			ok, err := try()
			if err != nil && !errors.Is(err, store.ErrConflict) && !store.IsRetryable(err) {
				t.Errorf("racer %d: %v", i, err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return won
}
