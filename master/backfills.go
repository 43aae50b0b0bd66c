package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Bounds of backfills.
const (
	// MaxBackfillRuns bounds the fires one backfill runs.
	MaxBackfillRuns = 10000
	// MaxBackfillConcurrency bounds a backfill's runs at once.
	MaxBackfillConcurrency = 100
	// maxBackfillsListed bounds a list of backfills.
	maxBackfillsListed = 100
	// maxBackfillRunsListed bounds the runs a backfill's answer lists.
	maxBackfillRunsListed = 500
)

// Backfill orders: which fires of the window run first.
const (
	BackfillOldestFirst = "oldest"
	BackfillNewestFirst = "newest"
)

// backfillStep names the one step of a plain task's backfill runs.
const backfillStep = "task"

// BackfillInput asks to run a workflow (or one task) for every fire of its
// schedule in the window (From, To]: at most MaxConcurrent runs at once
// (default 1), oldest or newest first.
type BackfillInput struct {
	From          time.Time         `json:"from"`
	To            time.Time         `json:"to"`
	MaxConcurrent int               `json:"max_concurrent,omitempty"`
	Order         string            `json:"order,omitempty"`
	Params        map[string]string `json:"params,omitempty"`
}

// Backfill is a backfill as the engine answers it, with its progress: its
// runs counted by status (queued ones wait their turn).
type Backfill struct {
	ID            string         `json:"id"`
	ProjectID     int64          `json:"project_id"`
	WorkflowID    string         `json:"workflow_id,omitempty"`
	TaskID        string         `json:"task_id,omitempty"`
	Title         string         `json:"title"`
	From          time.Time      `json:"from"`
	To            time.Time      `json:"to"`
	MaxConcurrent int            `json:"max_concurrent"`
	Order         string         `json:"order"`
	State         string         `json:"state"`
	Total         int            `json:"total"`
	Progress      map[string]int `json:"progress"`
	CreatedBy     string         `json:"created_by"`
	CreatedAt     time.Time      `json:"created_at"`
	EndedAt       *time.Time     `json:"ended_at"`
	// Runs are its runs that started or ended, by logical time (answered
	// for one backfill, not in lists).
	Runs []WorkflowRun `json:"runs,omitempty"`
}

func backfillNotFound(id string) error { return Errorf(KindNotFound, "backfill %s does not exist", id) }

// BackfillWorkflow runs a workflow for every fire of its schedule in a past
// window, each run with its fire as its logical time.
func (wf *Workflows) BackfillWorkflow(ctx context.Context, id string, in BackfillInput) (_ *Backfill, err error) {
	bid := uuid.NewString()
	defer func() { wf.m.events.record(ctx, "workflow.backfill", store.TargetWorkflow, id, err, "backfill "+bid) }()
	row, err := wf.get(ctx, id, ActOperate)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, row.ProjectID)
	w, err := workflowOf(row, "")
	if err != nil {
		return nil, err
	}
	if !w.scheduled() {
		return nil, protocol.FieldErrors{"from": "the workflow has no schedule: a backfill runs the fires of a schedule in a window"}
	}
	plan, err := w.schedulePlan(id)
	if err != nil {
		return nil, err
	}
	b := &store.Backfill{ID: bid, ProjectID: row.ProjectID, WorkflowID: id, Title: row.Title}
	return wf.backfill(ctx, b, &plan, in, row.Definition, w.Params)
}

// BackfillTask runs one task for every fire of its schedule in a past
// window, each as a one-step run with its fire as its logical time.
func (wf *Workflows) BackfillTask(ctx context.Context, taskID string, in BackfillInput) (_ *Backfill, err error) {
	bid := uuid.NewString()
	defer func() { wf.m.events.record(ctx, "task.backfill", store.TargetTask, taskID, err, "backfill "+bid) }()
	ctx, t, err := wf.m.tasks.taskFor(ctx, taskID, ActOperate)
	if err != nil {
		return nil, err
	}
	if t.Routing == protocol.RoutingBroadcast {
		return nil, Errorf(KindInvalid, "task %s has broadcast routing: a backfill runs one run per fire", taskID)
	}
	plan, err := protocol.NewPlan(&t.TaskDef)
	if err != nil {
		return nil, err
	}
	def := WorkflowDef{Title: t.Title, Timezone: t.Timezone, Steps: []WorkflowStep{{Name: backfillStep, Task: t.ID}}}
	js, err := json.Marshal(def)
	if err != nil {
		return nil, err
	}
	b := &store.Backfill{ID: bid, ProjectID: t.ProjectID, TaskID: t.ID, Title: t.Title}
	return wf.backfill(ctx, b, &plan, in, string(js), nil)
}

// backfill checks in against plan and stores b with one queued run per
// fire of the window.
func (wf *Workflows) backfill(ctx context.Context, b *store.Backfill, plan *protocol.Plan, in BackfillInput,
	definition string, defaults map[string]string) (*Backfill, error) {
	now := time.Now().UTC()
	fe := protocol.FieldErrors{}
	in.Order = strings.ToLower(strings.TrimSpace(in.Order))
	switch in.Order {
	case "", BackfillOldestFirst:
	case BackfillNewestFirst:
		b.NewestFirst = true
	default:
		fe["order"] = fmt.Sprintf("%q is not oldest or newest", clipText(in.Order, 32))
	}
	if in.MaxConcurrent == 0 {
		in.MaxConcurrent = 1
	}
	if in.MaxConcurrent < 1 || in.MaxConcurrent > MaxBackfillConcurrency {
		fe["max_concurrent"] = fmt.Sprintf("must be from 1 to %d", MaxBackfillConcurrency)
	}
	switch {
	case in.From.IsZero():
		fe["from"] = "is required: the window's start"
	case in.To.IsZero():
		fe["to"] = "is required: the window's end"
	case !in.To.After(in.From):
		fe["to"] = "must be after from"
	case in.To.After(now):
		fe["to"] = "is in the future: a backfill runs past fires (the schedule runs the others)"
	}
	checkParams(fe, "params", in.Params)
	if len(fe) > 0 {
		return nil, fe
	}
	// A fire at from itself is in the window.
	c := plan.Fires(in.From.Add(-time.Nanosecond), in.To, MaxBackfillRuns)
	switch {
	case c.N == 0:
		return nil, protocol.FieldErrors{"from": fmt.Sprintf("the schedule has no fire from %s to %s",
			in.From.UTC().Format(time.RFC3339), in.To.UTC().Format(time.RFC3339))}
	case c.More:
		return nil, protocol.FieldErrors{"from": fmt.Sprintf("the window holds more than %d fires: a backfill runs at most %d; split it",
			MaxBackfillRuns, MaxBackfillRuns)}
	}
	params := maps.Clone(defaults)
	if params == nil {
		params = map[string]string{}
	}
	maps.Copy(params, in.Params)
	js, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	b.From, b.To, b.MaxConcurrent, b.State, b.Total = in.From.UTC(), in.To.UTC(), in.MaxConcurrent, store.BackfillRunning, c.N
	b.CreatedBy = ActorFrom(ctx)
	runs := make([]store.WorkflowRun, 0, c.N)
	for t := in.From.Add(-time.Nanosecond); len(runs) < c.N; {
		f, ok := plan.Next(t)
		if !ok {
			break
		}
		runs = append(runs, store.WorkflowRun{ID: uuid.NewString(), WorkflowID: b.WorkflowID, ProjectID: b.ProjectID,
			Status: store.WorkflowQueued, LogicalTime: f, StartedBy: b.CreatedBy, Trigger: TriggerBackfill,
			Definition: definition, Params: string(js)})
		t = f
	}
	b.Total = len(runs)
	if err := store.RetryTx(ctx, wf.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		return store.CreateBackfill(ctx, tx, b, runs)
	}); err != nil {
		return nil, err
	}
	wf.m.log.Info("backfill created", "backfill", b.ID, "workflow", b.WorkflowID, "task", b.TaskID, "runs", b.Total,
		"by", b.CreatedBy)
	wf.runner.promote(WithActor(wf.m.life.ctx, ActorScheduler), "", b.ID)
	return wf.Backfill(ctx, b.ID)
}

// Backfill returns a backfill with its progress and runs.
func (wf *Workflows) Backfill(ctx context.Context, id string) (*Backfill, error) {
	b, err := wf.backfillRow(ctx, id, ActRead)
	if err != nil {
		return nil, err
	}
	out, err := wf.backfillOf(ctx, b)
	if err != nil {
		return nil, err
	}
	rows, err := store.BackfillRuns(ctx, wf.m.st.DB, id, maxBackfillRunsListed)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		r, err := workflowRunOf(&rows[i], nil)
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, *r)
	}
	return out, nil
}

// Backfills lists the backfills of a workflow, or of a task when taskID is
// given, newest first.
func (wf *Workflows) Backfills(ctx context.Context, workflowID, taskID string) ([]Backfill, error) {
	if taskID != "" {
		if _, _, err := wf.m.tasks.taskFor(ctx, taskID, ActRead); err != nil {
			return nil, err
		}
	} else if _, err := wf.get(ctx, workflowID, ActRead); err != nil {
		return nil, err
	}
	rows, err := store.ListBackfills(ctx, wf.m.st.DB, workflowID, taskID, maxBackfillsListed)
	if err != nil {
		return nil, err
	}
	out := make([]Backfill, 0, len(rows))
	for i := range rows {
		b, err := wf.backfillOf(ctx, &rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *b)
	}
	return out, nil
}

// PauseBackfill stops starting a backfill's runs; those in progress go on.
func (wf *Workflows) PauseBackfill(ctx context.Context, id string) error {
	return wf.moveBackfill(ctx, id, "pause", store.BackfillPaused, store.BackfillRunning)
}

// ResumeBackfill starts a paused backfill's runs again.
func (wf *Workflows) ResumeBackfill(ctx context.Context, id string) error {
	return wf.moveBackfill(ctx, id, "resume", store.BackfillRunning, store.BackfillPaused)
}

// CancelBackfill ends a backfill: its runs not started are cancelled;
// those in progress go on (each can be cancelled on its page).
func (wf *Workflows) CancelBackfill(ctx context.Context, id string) error {
	return wf.moveBackfill(ctx, id, "cancel", store.BackfillCancelled, store.BackfillRunning, store.BackfillPaused)
}

// moveBackfill moves a backfill from one of from to state.
func (wf *Workflows) moveBackfill(ctx context.Context, id, verb, state string, from ...string) (err error) {
	b, err := wf.backfillRow(ctx, id, ActOperate)
	if err != nil {
		return err
	}
	// The event names the workflow or task backfilled, whose page lists
	// the backfill.
	kind, target := store.TargetWorkflow, b.WorkflowID
	if b.TaskID != "" {
		kind, target = store.TargetTask, b.TaskID
	}
	defer func() { wf.m.events.record(ctx, "backfill."+verb, kind, target, err, "backfill "+id) }()
	ctx = withEventProject(ctx, b.ProjectID)
	var ok bool
	err = store.RetryTx(ctx, wf.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		if err := store.LockRow(ctx, tx, "backfills", id); err != nil {
			return err
		}
		if ok, err = store.SetBackfillState(ctx, tx, id, state, from...); err != nil || !ok {
			return err
		}
		if state == store.BackfillCancelled {
			_, err = store.CancelQueuedRuns(ctx, tx, id)
		}
		return err
	})
	if err != nil {
		return err
	}
	if !ok {
		return Errorf(KindState, "backfill %s is %s: it cannot %s", id, b.State, verb)
	}
	if state == store.BackfillRunning {
		wf.runner.promote(WithActor(wf.m.life.ctx, ActorScheduler), "", id)
	}
	return nil
}

// backfillRow reads a backfill and checks that whoever asks may do a to it.
func (wf *Workflows) backfillRow(ctx context.Context, id string, a Action) (*store.Backfill, error) {
	b, err := store.GetBackfill(ctx, wf.m.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, backfillNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, b.ProjectID, a, backfillNotFound(id)); err != nil {
		return nil, err
	}
	return b, nil
}

// backfillOf is a stored backfill as the engine answers it, with its
// progress.
func (wf *Workflows) backfillOf(ctx context.Context, b *store.Backfill) (*Backfill, error) {
	progress, err := store.BackfillProgress(ctx, wf.m.st.DB, b.ID)
	if err != nil {
		return nil, err
	}
	out := &Backfill{ID: b.ID, ProjectID: b.ProjectID, WorkflowID: b.WorkflowID, TaskID: b.TaskID, Title: b.Title,
		From: b.From, To: b.To, MaxConcurrent: b.MaxConcurrent, Order: BackfillOldestFirst, State: b.State, Total: b.Total,
		Progress: progress, CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt}
	if b.NewestFirst {
		out.Order = BackfillNewestFirst
	}
	if !b.EndedAt.IsZero() {
		out.EndedAt = &b.EndedAt
	}
	return out, nil
}
