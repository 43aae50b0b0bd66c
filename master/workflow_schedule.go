package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Workflow run triggers of the schedule and of backfills.
const (
	TriggerSchedule = "schedule"
	TriggerBackfill = "backfill"
)

// Bounds of the workflow scheduler.
const (
	// scheduleEvery is how often the leader looks for due fires: a fire
	// starts at most this late.
	scheduleEvery = 250 * time.Millisecond
	// dueWorkflows is how many due workflows one pass fires.
	dueWorkflows = 200
	// maxFiresPerPass bounds the fires of one workflow that one pass
	// catches up (fires due meanwhile, within misfireAfter).
	maxFiresPerPass = 10
)

// workflowScheduler starts the runs of scheduled workflows, on the leader.
// A workflow's next fire lives in the database; a fire moves it on by a
// conditional update in the transaction that records the fire's run, so
// each fire starts one run whichever master leads, and a leader that dies
// mid-fire leaves it to the next.
type workflowScheduler struct {
	m      *Master
	log    *slog.Logger
	ticker *periodic
	// nextLook is when the next pass reads the database: the earliest
	// next fire it saw, at most scheduleRecheck on (another master's edit
	// moves a fire without telling this one), unless woken sooner (an edit
	// on this master).
	mu       sync.Mutex
	nextLook time.Time
	// woken counts the wakes, so a pass does not overwrite one that came
	// while it read.
	woken uint64
}

// scheduleRecheck bounds how long the leader trusts the earliest fire it
// read: an edit on another master is seen within it.
const scheduleRecheck = 5 * time.Second

// wake makes the next pass read the schedules: a workflow was saved or
// resumed here.
func (s *workflowScheduler) wake() {
	s.mu.Lock()
	s.nextLook = time.Time{}
	s.woken++
	s.mu.Unlock()
}

func newWorkflowScheduler(m *Master) *workflowScheduler {
	s := &workflowScheduler{m: m, log: m.log}
	s.ticker = newPeriodic("workflow-schedule", scheduleEvery, scheduleEvery, s.pass, m.log)
	return s
}

// Start begins the passes.
func (s *workflowScheduler) Start() error { return s.ticker.Start() }

// Stop ends them.
func (s *workflowScheduler) Stop() { s.ticker.Stop() }

// pass fires the due workflows, on the leader only.
func (s *workflowScheduler) pass() {
	done, ok := s.m.life.track()
	if !ok {
		return
	}
	defer done()
	if !s.m.IsLeader() {
		s.wake() // a master that comes to lead reads at once
		return
	}
	now := time.Now()
	s.mu.Lock()
	look, woken := s.nextLook, s.woken
	s.mu.Unlock()
	if now.Before(look) {
		return // no fire due before then: an idle leader reads nothing
	}
	ctx := WithActor(s.m.life.ctx, ActorScheduler)
	due, err := store.DueWorkflows(ctx, s.m.st.DB, now, dueWorkflows)
	if err != nil {
		s.log.Warn("workflow schedules not read", "err", err)
		return
	}
	defer s.lookAgain(ctx, now, woken)
	for i := range due {
		if ctx.Err() != nil {
			return
		}
		// One workflow's bad definition or a failed write does not hold
		// up the others: it is tried again next pass.
		for range maxFiresPerPass {
			more, err := s.fire(ctx, &due[i], time.Now().UTC())
			if err != nil {
				s.log.Warn("workflow fire not started", "workflow", due[i].ID, "err", err)
			}
			if !more || err != nil {
				break
			}
		}
	}
}

// lookAgain sets when the next pass reads the schedules: at the earliest
// next fire, at most scheduleRecheck after now.
func (s *workflowScheduler) lookAgain(ctx context.Context, now time.Time, woken uint64) {
	next := now.Add(scheduleRecheck)
	if first, err := store.EarliestWorkflowFire(ctx, s.m.st.DB); err != nil {
		next = now // read again next pass
	} else if first != nil && first.Before(next) {
		next = *first
	}
	s.mu.Lock()
	if s.woken == woken { // a wake meanwhile: read again next pass
		s.nextLook = next
	}
	s.mu.Unlock()
}

// fire starts (or records) the due fire of w, moving its next fire on; more
// says another fire is due already.
func (s *workflowScheduler) fire(ctx context.Context, w *store.Workflow, now time.Time) (more bool, err error) {
	if w.NextFire == nil || w.NextFire.After(now) {
		return false, nil
	}
	fire := w.NextFire.UTC()
	var def WorkflowDef
	if err := json.Unmarshal([]byte(w.Definition), &def); err != nil {
		return false, fmt.Errorf("master: workflow %s: %w", w.ID, err)
	}
	var plan protocol.Plan
	if def.scheduled() {
		if plan, err = def.schedulePlan(w.ID); err != nil {
			return false, err
		}
	}
	loc := plan.Location()
	run := &store.WorkflowRun{ID: uuid.NewString(), WorkflowID: w.ID, ProjectID: w.ProjectID, Status: store.WorkflowRunning,
		LogicalTime: fire, StartedBy: ActorScheduler, Trigger: TriggerSchedule, Definition: w.Definition}
	var next *time.Time
	late := now.Sub(fire) > misfireAfter
	if late {
		// Fires missed while no master led: counted, recorded, and the
		// schedule goes on from now.
		c := plan.Fires(fire.Add(-time.Nanosecond), now, MaxBackfillRuns)
		what := fmt.Sprintf("%d fires were missed from %s to %s while no master ran the schedule", c.N,
			fire.In(loc).Format(time.RFC3339), c.Last.In(loc).Format(time.RFC3339))
		if c.More {
			what = fmt.Sprintf("more than %d fires were missed from %s while no master ran the schedule", c.N,
				fire.In(loc).Format(time.RFC3339))
		}
		if def.Misfire == protocol.MisfireRunOnce {
			run.Note = what + "; this run stands for the first (misfire policy run_once)"
		} else {
			run.Status, run.Note = store.WorkflowSkipped, what+" (misfire policy skip)"
		}
		if n, ok := plan.Next(now); ok {
			next = &n
		}
		s.m.events.record(withEventProject(ctx, w.ProjectID), "workflow.misfire", store.TargetWorkflow, w.ID, nil, what)
	} else if n, ok := plan.Next(fire); ok {
		next = &n
	}
	if run.Status == store.WorkflowRunning {
		if err := s.overlap(ctx, w.ID, &def, run); err != nil {
			return false, err
		}
	}
	params := def.Params
	if params == nil {
		params = map[string]string{}
	}
	js, err := json.Marshal(params)
	if err != nil {
		return false, err
	}
	run.Params = string(js)
	var steps []store.WorkflowStep
	if run.Status == store.WorkflowRunning {
		steps = stepsOf(&def)
	}
	if run.Status == store.WorkflowSkipped {
		run.EndedAt = now
	}
	var fired bool
	err = store.RetryTx(ctx, s.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if fired, err = store.MoveWorkflowFire(ctx, tx, w.ID, fire, next); err != nil || !fired {
			return err
		}
		return store.CreateWorkflowRun(ctx, tx, run, steps)
	})
	if err != nil || !fired {
		return false, err // another master fired it, or an edit moved it
	}
	s.log.Info("workflow fired", "workflow", w.ID, "run", run.ID, "fire", fire, "status", run.Status)
	if run.Status == store.WorkflowRunning {
		s.m.workflows.runner.advance(WithActor(s.m.life.ctx, "workflow "+w.ID), run.ID)
	}
	w.NextFire = next
	return next != nil && !next.After(now), nil
}

// overlap applies the workflow's overlap policy to a fire while other runs
// of it (outside backfills) are in progress: the fire runs, waits or is
// recorded skipped.
func (s *workflowScheduler) overlap(ctx context.Context, id string, def *WorkflowDef, run *store.WorkflowRun) error {
	if def.Overlap == protocol.OverlapAllow {
		return nil
	}
	running, err := store.CountWorkflowRuns(ctx, s.m.st.DB, id, "", store.WorkflowRunning)
	if err != nil || running == 0 {
		return err
	}
	if def.Overlap == protocol.OverlapQueue {
		queued, err := store.CountWorkflowRuns(ctx, s.m.st.DB, id, "", store.WorkflowQueued)
		if err != nil {
			return err
		}
		if queued == 0 {
			run.Status, run.Note = store.WorkflowQueued, "waits for the run in progress (overlap policy queue)"
			return nil
		}
		run.Status, run.Note = store.WorkflowSkipped, "a run was in progress and another waited already (overlap policy queue: one waits)"
		return nil
	}
	run.Status, run.Note = store.WorkflowSkipped, "a run was still in progress (overlap policy skip)"
	return nil
}

// stepsOf are the step rows of a new run of def.
func stepsOf(def *WorkflowDef) []store.WorkflowStep {
	steps := make([]store.WorkflowStep, len(def.Steps))
	for i, s := range def.Steps {
		steps[i] = store.WorkflowStep{Name: s.Name, TaskID: s.Task}
	}
	return steps
}

// Pause stops a workflow's schedule; runs may still start by hand, and
// those in progress go on.
func (wf *Workflows) Pause(ctx context.Context, id string) (err error) {
	defer func() { wf.m.events.record(ctx, "workflow.pause", store.TargetWorkflow, id, err, "") }()
	row, err := wf.get(ctx, id, ActOperate)
	if err != nil {
		return err
	}
	ctx = withEventProject(ctx, row.ProjectID)
	ok, err := store.SetWorkflowPaused(ctx, wf.m.st.DB, id, true, row.NextFire)
	if err == nil && !ok {
		return Errorf(KindState, "workflow %s is paused already", id)
	}
	return err
}

// Resume starts a paused workflow's schedule again from now: the fires of
// the pause are not run (a backfill runs them when they are wanted).
func (wf *Workflows) Resume(ctx context.Context, id string) (err error) {
	defer func() { wf.m.events.record(ctx, "workflow.resume", store.TargetWorkflow, id, err, "") }()
	row, err := wf.get(ctx, id, ActOperate)
	if err != nil {
		return err
	}
	ctx = withEventProject(ctx, row.ProjectID)
	w, err := workflowOf(row, "")
	if err != nil {
		return err
	}
	var next *time.Time
	if w.scheduled() {
		plan, err := w.schedulePlan(id)
		if err != nil {
			return err
		}
		if n, ok := plan.Next(time.Now()); ok {
			next = &n
		}
	}
	ok, err := store.SetWorkflowPaused(ctx, wf.m.st.DB, id, false, next)
	if err == nil && !ok {
		return Errorf(KindState, "workflow %s is not paused", id)
	}
	wf.scheduler.wake()
	return err
}

// promote starts the queued runs of a workflow (outside backfills: the
// one that waits for the run in progress) or of a backfill (up to its
// concurrency), under the row lock of the workflow or backfill, so that
// masters promoting at once do not start more than allowed; a backfill
// with nothing left to start or finish is done.
func (r *workflowRunner) promote(ctx context.Context, workflowID, backfill string) {
	db := r.m.st.DB
	var started []string
	err := store.RetryTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		started = started[:0]
		limit, newest := 1, false
		if backfill != "" {
			if err := store.LockRow(ctx, tx, "backfills", backfill); err != nil {
				return err
			}
			b, err := store.GetBackfill(ctx, tx, backfill)
			if err != nil {
				return err
			}
			if b.State != store.BackfillRunning {
				return nil
			}
			running, err := store.CountWorkflowRuns(ctx, tx, "", backfill, store.WorkflowRunning)
			if err != nil {
				return err
			}
			limit, newest = b.MaxConcurrent-running, b.NewestFirst
			if limit <= 0 {
				return nil
			}
		} else {
			if err := store.LockRow(ctx, tx, "workflows", workflowID); err != nil {
				return err
			}
			running, err := store.CountWorkflowRuns(ctx, tx, workflowID, "", store.WorkflowRunning)
			if err != nil || running > 0 {
				return err
			}
		}
		queued, err := store.QueuedWorkflowRuns(ctx, tx, workflowID, backfill, newest, limit)
		if err != nil {
			return err
		}
		if len(queued) == 0 && backfill != "" {
			running, err := store.CountWorkflowRuns(ctx, tx, "", backfill, store.WorkflowRunning)
			if err != nil || running > 0 {
				return err
			}
			_, err = store.SetBackfillState(ctx, tx, backfill, store.BackfillDone, store.BackfillRunning)
			return err
		}
		for i := range queued {
			var def WorkflowDef
			if err := json.Unmarshal([]byte(queued[i].Definition), &def); err != nil {
				return fmt.Errorf("master: workflow run %s: definition: %w", queued[i].ID, err)
			}
			ok, err := store.StartQueuedRun(ctx, tx, queued[i].ID, stepsOf(&def))
			if err != nil {
				return err
			}
			if ok {
				started = append(started, queued[i].ID)
			}
		}
		return nil
	})
	if err != nil {
		r.log.Warn("queued workflow runs not started; the reconcile pass tries again", "workflow", workflowID, "backfill", backfill, "err", err)
		return
	}
	for _, id := range started {
		r.advance(ctx, id)
	}
}

// promotePass starts what waits: the runs queued behind others, and the
// backfills' runs, on the leader's reconcile pass.
func (r *workflowRunner) promotePass(ctx context.Context) {
	ids, err := store.QueuedWorkflows(ctx, r.m.st.DB, reconcileRuns)
	if err != nil {
		r.log.Warn("queued workflow runs not read", "err", err)
	}
	for _, id := range ids {
		r.promote(ctx, id, "")
	}
	backfills, err := store.BackfillsIn(ctx, r.m.st.DB, store.BackfillRunning, reconcileRuns)
	if err != nil && !errors.Is(err, context.Canceled) {
		r.log.Warn("backfills not read", "err", err)
	}
	for _, id := range backfills {
		if ctx.Err() != nil {
			return
		}
		r.promote(ctx, "", id)
		if err := store.TouchBackfill(ctx, r.m.st.DB, id); err != nil {
			r.log.Warn("backfill not touched", "backfill", id, "err", err)
		}
	}
}
