package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Workflows is the workflow domain: workflows (tasks of one project joined
// into a DAG of steps), their runs and the dispatch of their steps.
type Workflows struct {
	m *Master
	// runner dispatches steps and moves runs on (workflow_runs.go).
	runner *workflowRunner
	// scheduler starts the runs of scheduled workflows
	// (workflow_schedule.go).
	scheduler *workflowScheduler
}

// Workflows is the engine's workflow domain.
func (m *Master) Workflows() *Workflows { return m.workflows }

// maxWorkflowsListed bounds a list of workflows.
const maxWorkflowsListed = 1000

// Workflow is a workflow as the engine answers it.
type Workflow struct {
	ID        string `json:"id"`
	ProjectID int64  `json:"project_id"`
	Project   string `json:"project,omitempty"`
	// Version counts the saves: an edit names the one it started from.
	Version int `json:"version"`
	// NextFire is the schedule's next fire (nil: none, or manual only).
	NextFire *time.Time `json:"next_fire"`
	// Paused stops the schedule; runs may still start by hand.
	Paused bool `json:"paused"`
	// LastRun is its latest run, in lists.
	LastRun *LastWorkflowRun `json:"last_run,omitempty"`
	WorkflowDef
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// WorkflowInput is a workflow to save: its definition, its project (by
// name, when it is created; the default project when empty) and, for an
// edit, the version it started from (0: any).
type WorkflowInput struct {
	WorkflowDef
	Project string `json:"project,omitempty"`
	Version int    `json:"version,omitempty"`
	// Note says why, in the version the save makes (optional).
	Note string `json:"note,omitempty"`
}

func workflowNotFound(id string) error {
	return Errorf(KindNotFound, "workflow %s does not exist", id)
}

// Create validates and stores a new workflow.
func (wf *Workflows) Create(ctx context.Context, in WorkflowInput) (_ *Workflow, err error) {
	id := uuid.NewString()
	defer func() {
		target := id
		if err != nil {
			target = ""
		}
		wf.m.events.record(ctx, "workflow.create", store.TargetWorkflow, target, err, "“"+in.Title+"”")
	}()
	p, err := wf.m.projects.project(ctx, strings.TrimSpace(in.Project))
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, p.ID)
	if err := authorize(ctx, p.ID, ActEdit, projectNotFound(p.Name)); err != nil {
		return nil, err
	}
	if msg := noteProblem(in.Note); msg != "" {
		return nil, protocol.FieldErrors{"note": msg}
	}
	row, err := wf.check(ctx, p.ID, id, &in.WorkflowDef)
	if err != nil {
		return nil, err
	}
	row.ID, row.ProjectID, row.CreatedBy = id, p.ID, ActorFrom(ctx)
	if err := store.RetryTx(ctx, wf.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		if err := store.CreateWorkflow(ctx, tx, row); err != nil {
			return err
		}
		return wf.writeWorkflowVersion(ctx, tx, nil, row, in.Note)
	}); err != nil {
		return nil, err
	}
	wf.scheduler.wake()
	return workflowOf(row, p.Name)
}

// Update replaces a workflow's definition; runs in progress keep the one
// they started with.
func (wf *Workflows) Update(ctx context.Context, id string, in WorkflowInput) (_ *Workflow, err error) {
	defer func() {
		wf.m.events.record(ctx, "workflow.update", store.TargetWorkflow, id, err, "“"+in.Title+"”")
	}()
	cur, err := wf.get(ctx, id, ActEdit)
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, cur.ProjectID)
	if in.Version != 0 && in.Version != cur.Version {
		return nil, &Error{Kind: KindState, Err: ErrVersionMoved, Msg: fmt.Sprintf(
			"workflow %s changed since version %d (it is at version %d, saved %s); reload it and make your change again",
			id, in.Version, cur.Version, cur.UpdatedAt.UTC().Format(time.RFC3339))}
	}
	if msg := noteProblem(in.Note); msg != "" {
		return nil, protocol.FieldErrors{"note": msg}
	}
	row, err := wf.check(ctx, cur.ProjectID, id, &in.WorkflowDef)
	if err != nil {
		return nil, err
	}
	row.ID, row.ProjectID, row.Version = id, cur.ProjectID, cur.Version+1
	row.CreatedBy, row.CreatedAt = cur.CreatedBy, cur.CreatedAt
	err = store.RetryTx(ctx, wf.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		if err := store.UpdateWorkflow(ctx, tx, row, cur.Version); err != nil {
			return err
		}
		return wf.writeWorkflowVersion(ctx, tx, cur, row, in.Note)
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, &Error{Kind: KindState, Err: ErrVersionMoved, Msg: fmt.Sprintf(
			"workflow %s was saved by someone else meanwhile; reload it and make your change again", id)}
	} else if err != nil {
		return nil, err
	}
	wf.scheduler.wake()
	return workflowOf(row, "")
}

// Get returns a workflow whoever asks may read.
func (wf *Workflows) Get(ctx context.Context, id string) (*Workflow, error) {
	row, err := wf.get(ctx, id, ActRead)
	if err != nil {
		return nil, err
	}
	name := ""
	if p, err := wf.m.projects.projectByID(ctx, row.ProjectID); err == nil {
		name = p.Name
	}
	return workflowOf(row, name)
}

// get reads a workflow and checks that whoever asks may do a to it.
func (wf *Workflows) get(ctx context.Context, id string, a Action) (*store.Workflow, error) {
	row, err := store.GetWorkflow(ctx, wf.m.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, workflowNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, row.ProjectID, a, workflowNotFound(id)); err != nil {
		return nil, err
	}
	return row, nil
}

// LastWorkflowRun is a workflow's latest run, as a list shows it.
type LastWorkflowRun struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at"`
}

// List returns the workflows whoever asks may read, by title, each with
// its latest run; query, when given, keeps those whose title or key holds
// it (any case).
func (wf *Workflows) List(ctx context.Context, query string) ([]Workflow, error) {
	if !utf8.ValidString(query) || utf8.RuneCountInString(query) > protocol.MaxTitleLen {
		return nil, protocol.FieldErrors{"q": fmt.Sprintf("must be text of at most %d characters", protocol.MaxTitleLen)}
	}
	rows, err := store.ListWorkflows(ctx, wf.m.st.DB, readableProjects(ctx), maxWorkflowsListed)
	if err != nil {
		return nil, err
	}
	q := strings.ToLower(strings.TrimSpace(query))
	out := make([]Workflow, 0, len(rows))
	ids := make([]string, 0, len(rows))
	for i := range rows {
		if q != "" && !strings.Contains(strings.ToLower(rows[i].Title), q) && !strings.Contains(strings.ToLower(rows[i].Key), q) {
			continue
		}
		w, err := workflowOf(&rows[i], "")
		if err != nil {
			return nil, err
		}
		out = append(out, *w)
		ids = append(ids, w.ID)
	}
	last, err := store.LastWorkflowRuns(ctx, wf.m.st.DB, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if r, ok := last[out[i].ID]; ok {
			out[i].LastRun = &LastWorkflowRun{ID: r.ID, Status: r.Status, StartedAt: r.StartedAt}
		}
	}
	return out, nil
}

// Delete deletes a workflow; its runs stay readable, and those in progress
// go on.
func (wf *Workflows) Delete(ctx context.Context, id string) (err error) {
	defer func() { wf.m.events.record(ctx, "workflow.delete", store.TargetWorkflow, id, err, "") }()
	row, err := wf.get(ctx, id, ActEdit)
	if err != nil {
		return err
	}
	ctx = withEventProject(ctx, row.ProjectID)
	return store.DeleteWorkflow(ctx, wf.m.st.DB, id)
}

// check normalizes and validates d for project (id: the workflow being
// edited, "" for a new one) and returns the row it makes.
func (wf *Workflows) check(ctx context.Context, project int64, id string, d *WorkflowDef) (*store.Workflow, error) {
	d.normalize()
	ids := make([]string, 0, len(d.Steps))
	for _, s := range d.Steps {
		ids = append(ids, s.Task)
	}
	tasks, err := store.GetTasks(ctx, wf.m.st.DB, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	fe := d.validate(id, now, func(taskID string) string {
		t := tasks[taskID]
		if t == nil || t.ProjectID != project {
			// One answer for both: whether a task exists in another
			// project is not the caller's to learn.
			return fmt.Sprintf("task %s does not exist in this workflow's project", clipText(taskID, 64))
		}
		return ""
	})
	if d.Key != "" && fe["key"] == "" {
		other, err := store.WorkflowWithKey(ctx, wf.m.st.DB, project, d.Key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if err == nil && other.ID != id {
			if fe == nil {
				fe = protocol.FieldErrors{}
			}
			fe["key"] = fmt.Sprintf("workflow “%s” has this key already", other.Title)
		}
	}
	if len(fe) > 0 {
		return nil, fe
	}
	js, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("master: encode workflow: %w", err)
	}
	row := &store.Workflow{Title: d.Title, Key: d.Key, Definition: string(js)}
	if d.scheduled() {
		plan, err := d.schedulePlan(id)
		if err != nil {
			return nil, fmt.Errorf("master: workflow schedule: %w", err)
		}
		if next, ok := plan.Next(now); ok {
			row.NextFire = &next
		}
	}
	return row, nil
}

// workflowOf is a stored workflow as the engine answers it.
func workflowOf(row *store.Workflow, project string) (*Workflow, error) {
	w := &Workflow{ID: row.ID, ProjectID: row.ProjectID, Project: project, Version: row.Version, NextFire: row.NextFire, Paused: row.Paused,
		CreatedBy: row.CreatedBy, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
	if err := json.Unmarshal([]byte(row.Definition), &w.WorkflowDef); err != nil {
		return nil, fmt.Errorf("master: workflow %s: %w", row.ID, err)
	}
	return w, nil
}
