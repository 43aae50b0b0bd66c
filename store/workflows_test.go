package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestWorkflowStepsMoveOnce: a workflow, its run and steps are stored; of
// ten concurrent dispatches of one step exactly one wins; a step moves only
// from the states given; a run ends once; the latest run of a step and the
// versions recent runs ran are read back, on every engine.
func TestWorkflowStepsMoveOnce(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx, db := storetest.Ctx(t), s.Store.DB
		w := &store.Workflow{ID: "w1", ProjectID: store.DefaultProjectID, Title: "etl", Definition: "{}"}
		if err := store.CreateWorkflow(ctx, db, w); err != nil {
			t.Fatal(err)
		}
		w.Title, w.Version = "etl 2", 2
		if err := store.UpdateWorkflow(ctx, db, w, 1); err != nil {
			t.Fatal(err)
		}
		if err := store.UpdateWorkflow(ctx, db, w, 1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("an update from a version that is gone: %v", err)
		}
		run := &store.WorkflowRun{ID: "r1", WorkflowID: "w1", ProjectID: store.DefaultProjectID, Status: store.WorkflowRunning,
			LogicalTime: time.Now().UTC(), Definition: "{}", Params: "{}"}
		if err := store.CreateWorkflowRun(ctx, db, run, []store.WorkflowStep{{Name: "a", TaskID: "t1"}, {Name: "b", TaskID: "t1"}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 10 {
			wg.Go(func() {
				ok, err := store.DispatchStep(ctx, db, "r1", "a", "d"+string(rune('0'+i)), "w1")
				if err != nil && !errors.Is(err, store.ErrConflict) && !store.IsRetryable(err) {
					t.Errorf("dispatch %d: %v", i, err)
				}
				if ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d dispatches of one step won, want 1", won)
		}
		_, steps, err := store.GetWorkflowRun(ctx, db, "r1")
		if err != nil || len(steps) != 2 || steps[0].State != store.StepDispatched || steps[0].DispatchID == "" || steps[0].Node != "w1" {
			t.Fatalf("steps after the dispatch: %v %+v", err, steps)
		}
		// b is pending: a move from running does not apply.
		if ok, err := store.SetStep(ctx, db, &store.WorkflowStep{RunID: "r1", Name: "b", State: store.StepSuccess}, store.StepRunning); err != nil || ok {
			t.Fatalf("a move from a state the step is not in: %v %v", ok, err)
		}
		ok, err := store.SetStep(ctx, db, &store.WorkflowStep{RunID: "r1", Name: "a", State: store.StepSuccess, TaskRun: "run-a", Node: "w1",
			Attempt: 1, Output: `{"batch":1}`}, store.StepDispatched, store.StepRunning)
		if err != nil || !ok {
			t.Fatalf("a's end: %v %v", ok, err)
		}
		if ended, err := store.EndWorkflowRun(ctx, db, "r1", store.WorkflowSuccess); err != nil || !ended {
			t.Fatalf("end: %v %v", ended, err)
		}
		if ended, err := store.EndWorkflowRun(ctx, db, "r1", store.WorkflowFailed); err != nil || ended {
			t.Fatalf("a second end: %v %v", ended, err)
		}
		got, steps, err := store.GetWorkflowRun(ctx, db, "r1")
		if err != nil || got.Status != store.WorkflowSuccess || got.EndedAt.IsZero() || steps[0].Output != `{"batch":1}` || steps[0].EndedAt.IsZero() {
			t.Fatalf("the run: %v %+v %+v", err, got, steps)
		}
		// The runs of a step, and the versions recent runs ran.
		now := time.Now().UTC()
		runs := []store.Run{
			{ID: "x1", TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now.Add(-2 * time.Second), EndedAt: now, Result: store.ResultFailed,
				Attempt: 1, WorkflowRun: "r1", WorkflowStep: "a", TaskVersion: 3},
			{ID: "x2", TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now.Add(-time.Second), EndedAt: now, Result: store.ResultSuccess,
				Attempt: 2, WorkflowRun: "r1", WorkflowStep: "a", TaskVersion: 4},
			{ID: "x3", TaskID: "t1", Node: "w1", ScheduledAt: now, StartedAt: now.Add(-3 * time.Second), EndedAt: now, Result: store.ResultSuccess,
				Attempt: 1, TaskVersion: 1},
		}
		if _, err := store.InsertRuns(ctx, db, runs); err != nil {
			t.Fatal(err)
		}
		latest, err := store.LatestStepRun(ctx, db, "r1", "a", nil)
		if err != nil || latest.ID != "x2" {
			t.Fatalf("latest run of a: %v %+v", err, latest)
		}
		// The runs of a node the step avoids (it lost the step) are past.
		if _, err := store.LatestStepRun(ctx, db, "r1", "a", []string{"w1"}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("latest run of a avoiding w1: %v, want none", err)
		}
		if _, err := store.LatestStepRun(ctx, db, "r1", "b", nil); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("latest run of b: %v", err)
		}
		vs, err := store.RecentRunVersions(ctx, db, "t1", 2)
		if err != nil || len(vs) != 2 || (vs[0] != 3 && vs[0] != 4) || (vs[1] != 3 && vs[1] != 4) || vs[0] == vs[1] {
			t.Fatalf("versions of the two latest runs: %v %v, want 3 and 4", err, vs)
		}
	})
}
