package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Workflow run triggers: what started a run.
const (
	TriggerManual = "manual"
	TriggerAPI    = "api"
	TriggerRerun  = "rerun"
)

// Bounds of the workflow engine.
const (
	// maxWorkflowRunsListed bounds a workflow's list of runs.
	maxWorkflowRunsListed = 200
	// reconcileRuns is how many runs in progress one reconcile pass looks
	// at, least recently looked at first.
	reconcileRuns = 200
	// resendAfter is how long a dispatched step may wait for its first
	// report before its run is sent again (to the same node, which starts
	// it only if it did not yet).
	resendAfter = 30 * time.Second
)

// WorkflowRun is a run of a workflow as the engine answers it.
type WorkflowRun struct {
	ID          string     `json:"id"`
	WorkflowID  string     `json:"workflow_id"`
	ProjectID   int64      `json:"project_id"`
	Title       string     `json:"title"`
	Status      string     `json:"status"`
	LogicalTime time.Time  `json:"logical_time"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at"`
	StartedBy   string     `json:"started_by"`
	Trigger     string     `json:"trigger"`
	// RerunOf names the run this one runs again (Rerun failed).
	RerunOf string `json:"rerun_of,omitempty"`
	// Note says why a run was skipped or queued, or which fires it
	// stands for.
	Note string `json:"note,omitempty"`
	// BackfillID names the backfill that made the run.
	BackfillID string            `json:"backfill_id,omitempty"`
	Params     map[string]string `json:"params,omitempty"`
	Steps      []StepRun         `json:"steps,omitempty"`
}

// StepRun is one step of a workflow run: its state, and the run of its
// task (Run, the id of its latest attempt) once it was sent.
type StepRun struct {
	Name      string     `json:"name"`
	TaskID    string     `json:"task_id"`
	State     string     `json:"state"`
	Run       string     `json:"run,omitempty"`
	Node      string     `json:"node,omitempty"`
	Attempt   int        `json:"attempt,omitempty"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	After     []StepEdge `json:"after,omitempty"`
	// Shards are the runs of a broadcast step, one per executor.
	Shards []ShardRun `json:"shards,omitempty"`
}

func workflowRunNotFound(id string) error {
	return Errorf(KindNotFound, "workflow run %s does not exist", id)
}

// RunNow starts a run of a workflow now, with params over the workflow's
// defaults, and returns it with its first steps sent.
func (wf *Workflows) RunNow(ctx context.Context, id string, params map[string]string) (_ *WorkflowRun, err error) {
	runID := uuid.NewString()
	defer func() {
		wf.m.events.record(ctx, "workflow.run", store.TargetWorkflow, id, err, "run "+runID)
	}()
	row, err := wf.get(ctx, id, ActOperate)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, row.ProjectID)
	w, err := workflowOf(row, "")
	if err != nil {
		return nil, err
	}
	fe := protocol.FieldErrors{}
	checkParams(fe, "params", params)
	if len(fe) > 0 {
		return nil, fe
	}
	all := maps.Clone(w.Params)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, params)
	js, err := json.Marshal(all)
	if err != nil {
		return nil, err
	}
	trigger := TriggerManual
	if p := PrincipalFrom(ctx); p != nil && p.Token != "" {
		trigger = TriggerAPI
	}
	now := time.Now().UTC()
	run := &store.WorkflowRun{ID: runID, WorkflowID: id, ProjectID: row.ProjectID, Status: store.WorkflowRunning,
		LogicalTime: now, StartedBy: ActorFrom(ctx), Trigger: trigger, Definition: row.Definition, Params: string(js)}
	steps := make([]store.WorkflowStep, len(w.Steps))
	for i, s := range w.Steps {
		steps[i] = store.WorkflowStep{Name: s.Name, TaskID: s.Task}
	}
	err = store.RetryTx(ctx, wf.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		return store.CreateWorkflowRun(ctx, tx, run, steps)
	})
	if err != nil {
		return nil, err
	}
	wf.m.log.Info("workflow run started", "workflow", id, "run", runID, "by", run.StartedBy)
	wf.runner.advance(WithActor(wf.m.life.ctx, "workflow "+id), runID)
	return wf.Run(ctx, runID)
}

// Run returns one workflow run with its steps.
func (wf *Workflows) Run(ctx context.Context, runID string) (*WorkflowRun, error) {
	r, steps, err := store.GetWorkflowRun(ctx, wf.m.st.DB, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, workflowRunNotFound(runID)
	}
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, r.ProjectID, ActRead, workflowRunNotFound(runID)); err != nil {
		return nil, err
	}
	out, err := workflowRunOf(r, steps)
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		if st.Node != store.BroadcastNode {
			continue
		}
		shards, err := store.ShardsOf(ctx, wf.m.st.DB, runID, "")
		if err != nil {
			return nil, err
		}
		for i := range out.Steps {
			for _, sh := range shards {
				if sh.Step == out.Steps[i].Name {
					out.Steps[i].Shards = append(out.Steps[i].Shards, shardRunOf(sh))
				}
			}
		}
		break
	}
	return out, nil
}

// shardRunOf is a stored shard as the engine answers it.
func shardRunOf(sh store.WorkflowShard) ShardRun {
	out := ShardRun{Node: sh.Node, State: sh.State, Run: sh.TaskRun, Attempt: sh.Attempt}
	if !sh.StartedAt.IsZero() {
		out.StartedAt = &sh.StartedAt
	}
	if !sh.EndedAt.IsZero() {
		out.EndedAt = &sh.EndedAt
	}
	return out
}

// Runs lists a workflow's runs, newest first, without their steps.
func (wf *Workflows) Runs(ctx context.Context, id string) ([]WorkflowRun, error) {
	if _, err := wf.get(ctx, id, ActRead); err != nil {
		return nil, err
	}
	rows, err := store.ListWorkflowRuns(ctx, wf.m.st.DB, id, maxWorkflowRunsListed)
	if err != nil {
		return nil, err
	}
	out := make([]WorkflowRun, 0, len(rows))
	for i := range rows {
		r, err := workflowRunOf(&rows[i], nil)
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, nil
}

// Cancel ends a workflow run in progress as cancelled: its steps not yet
// sent are skipped, and those in progress killed.
func (wf *Workflows) Cancel(ctx context.Context, runID string) (err error) {
	defer func() { wf.m.events.record(ctx, "workflow.cancel", store.TargetWorkflow, runID, err, "") }()
	r, _, err := store.GetWorkflowRun(ctx, wf.m.st.DB, runID)
	if errors.Is(err, store.ErrNotFound) {
		return workflowRunNotFound(runID)
	}
	if err != nil {
		return err
	}
	if err := authorize(ctx, r.ProjectID, ActOperate, workflowRunNotFound(runID)); err != nil {
		return err
	}
	ctx = withEventProject(ctx, r.ProjectID)
	ended, err := store.EndWorkflowRun(ctx, wf.m.st.DB, runID, store.WorkflowCancelled, store.WorkflowRunning, store.WorkflowQueued)
	if err != nil {
		return err
	}
	if !ended {
		return Errorf(KindState, "workflow run %s is not in progress: it ended as %s", runID, r.Status)
	}
	// A queued run has no steps to stop; one started meanwhile has.
	wf.runner.stopSteps(ctx, runID, "the workflow run was cancelled by "+ActorFrom(ctx))
	wf.runner.ended(WithActor(wf.m.life.ctx, ActorScheduler), r)
	return nil
}

// workflowRunOf is a stored run as the engine answers it.
func workflowRunOf(r *store.WorkflowRun, steps []store.WorkflowStep) (*WorkflowRun, error) {
	out := &WorkflowRun{ID: r.ID, WorkflowID: r.WorkflowID, ProjectID: r.ProjectID, Status: r.Status,
		LogicalTime: r.LogicalTime, StartedAt: r.StartedAt, StartedBy: r.StartedBy, Trigger: r.Trigger, RerunOf: r.RerunOf,
		Note: r.Note, BackfillID: r.BackfillID}
	if !r.EndedAt.IsZero() {
		out.EndedAt = &r.EndedAt
	}
	if r.Params != "" {
		if err := json.Unmarshal([]byte(r.Params), &out.Params); err != nil {
			return nil, fmt.Errorf("master: workflow run %s: params: %w", r.ID, err)
		}
	}
	if r.Definition == "" {
		return out, nil // a list leaves the definition out
	}
	var def WorkflowDef
	if err := json.Unmarshal([]byte(r.Definition), &def); err != nil {
		return nil, fmt.Errorf("master: workflow run %s: definition: %w", r.ID, err)
	}
	out.Title = def.Title
	byName := make(map[string]*store.WorkflowStep, len(steps))
	for i := range steps {
		byName[steps[i].Name] = &steps[i]
	}
	for _, s := range def.Steps {
		sr := StepRun{Name: s.Name, TaskID: s.Task, State: store.StepPending, After: s.After}
		if st := byName[s.Name]; st != nil {
			sr.State, sr.Run, sr.Node, sr.Attempt = st.State, st.TaskRun, st.Node, st.Attempt
			if !st.StartedAt.IsZero() {
				sr.StartedAt = &st.StartedAt
			}
			if !st.EndedAt.IsZero() {
				sr.EndedAt = &st.EndedAt
			}
		}
		out.Steps = append(out.Steps, sr)
	}
	return out, nil
}

// RerunFailed runs an ended run's steps that did not succeed (failed,
// timed out, killed, lost, skipped) again, with every step after them, as
// a new run of the same logical time and params that keeps the successful
// steps and their results. The new run names the one it reruns; reports
// still on their way for the old one stay with it.
func (wf *Workflows) RerunFailed(ctx context.Context, runID string) (_ *WorkflowRun, err error) {
	newID := uuid.NewString()
	defer func() { wf.m.events.record(ctx, "workflow.rerun", store.TargetWorkflow, runID, err, "as run "+newID) }()
	r, steps, err := store.GetWorkflowRun(ctx, wf.m.st.DB, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, workflowRunNotFound(runID)
	}
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, r.ProjectID, ActOperate, workflowRunNotFound(runID)); err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, r.ProjectID)
	if r.Status == store.WorkflowRunning || r.Status == store.WorkflowQueued || r.Status == store.WorkflowSuccess {
		return nil, Errorf(KindState, "workflow run %s is %s: only a failed, timed out or cancelled run is run again", runID, r.Status)
	}
	var def WorkflowDef
	if err := json.Unmarshal([]byte(r.Definition), &def); err != nil {
		return nil, fmt.Errorf("master: workflow run %s: definition: %w", runID, err)
	}
	again := rerunSteps(&def, steps)
	kept := make([]store.WorkflowStep, 0, len(def.Steps))
	byName := make(map[string]store.WorkflowStep, len(steps))
	for _, st := range steps {
		byName[st.Name] = st
	}
	for _, s := range def.Steps {
		st := store.WorkflowStep{Name: s.Name, TaskID: s.Task}
		if !again[s.Name] {
			st = byName[s.Name] // succeeded: kept with its run and result
		}
		kept = append(kept, st)
	}
	run := &store.WorkflowRun{ID: newID, WorkflowID: r.WorkflowID, ProjectID: r.ProjectID, Status: store.WorkflowRunning,
		LogicalTime: r.LogicalTime, StartedBy: ActorFrom(ctx), Trigger: TriggerRerun, Definition: r.Definition, Params: r.Params,
		RerunOf: runID}
	var other string
	err = store.RetryTx(ctx, wf.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		// Two operators pressing Rerun failed at once make one rerun:
		// under the old run's row lock, a rerun in progress refuses the
		// second.
		if err := store.LockRow(ctx, tx, "workflow_runs", runID); err != nil {
			return err
		}
		var err error
		if other, err = store.RerunInProgress(ctx, tx, runID); err != nil || other != "" {
			return err
		}
		return store.CreateWorkflowRun(ctx, tx, run, kept)
	})
	if err != nil {
		return nil, err
	}
	if other != "" {
		return nil, Errorf(KindState, "workflow run %s is being run again already, as run %s", runID, other)
	}
	wf.m.log.Info("workflow run rerun", "run", runID, "as", newID, "steps", len(again), "by", run.StartedBy)
	wf.runner.advance(WithActor(wf.m.life.ctx, "workflow "+r.WorkflowID), newID)
	return wf.Run(ctx, newID)
}

// rerunSteps are the steps a rerun runs again: those that did not
// succeed, and every step after one of them.
func rerunSteps(def *WorkflowDef, steps []store.WorkflowStep) map[string]bool {
	state := make(map[string]string, len(steps))
	for _, st := range steps {
		state[st.Name] = st.State
	}
	again := map[string]bool{}
	for _, s := range def.Steps {
		if state[s.Name] != store.StepSuccess {
			again[s.Name] = true
		}
	}
	// A step after one run again runs again: go round until none is
	// added (a DAG of at most MaxWorkflowSteps steps).
	for added := true; added; {
		added = false
		for _, s := range def.Steps {
			if again[s.Name] {
				continue
			}
			for _, e := range s.After {
				if again[e.Step] {
					again[s.Name], added = true, true
					break
				}
			}
		}
	}
	return again
}
