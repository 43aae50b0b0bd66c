package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Task is a task as the open API shows it.
type Task struct {
	protocol.TaskDef
	// Project is the name of the project the task belongs to.
	Project   string   `json:"project"`
	ProjectID int64    `json:"-"`
	Executors []string `json:"executors"`
	// Selector is the task's label selector ("" for none); Selected are the
	// approved workers it selects now (any status), named executors
	// excepted. A fire runs on the running ones of both.
	Selector   string           `json:"selector"`
	Selected   []string         `json:"selected"`
	Keepers    []string         `json:"keepers"`
	Children   []string         `json:"children"`
	Status     store.TaskStatus `json:"status"` // a number in JSON
	LastRunAt  *time.Time       `json:"last_run_at"`
	NextRunAt  *time.Time       `json:"next_run_at"`
	RunCount   int64            `json:"run_count"`
	LastResult string           `json:"last_result"`
	CreatedBy  string           `json:"created_by"`
	CreatedAt  time.Time        `json:"created_at"`
	UpdatedAt  time.Time        `json:"updated_at"`
	// Version is the number of the definition in force: every save makes
	// the next (Tasks.Versions); an edit that names the version it started
	// from is refused when another save came first.
	Version int `json:"version"`
	// Runnable is false when the task is running but none of its executors
	// is (all offline, disabled or gone): its fires cannot run anywhere. It is
	// true for every other task, whose status says why it does not fire.
	Runnable bool `json:"runnable"`
	// NotRunnableSince is, when Runnable is false, the latest status change
	// among its executors: when the last of them stopped running. Absent when
	// the task is runnable or has no executor left.
	NotRunnableSince *time.Time `json:"not_runnable_since,omitempty"`
	// Health is how its last runs went (see TaskHealth); filled by the
	// answers that show it (GET of a task and of the list), absent otherwise.
	Health *TaskHealth `json:"health,omitempty"`
}

// members returns the task's named and selected executors, by name.
func (t *Task) members() []string {
	if len(t.Selected) == 0 {
		return t.Executors
	}
	out := append(slices.Clone(t.Executors), t.Selected...)
	slices.Sort(out)
	return slices.Compact(out)
}

// runGrantTTL is how long a run grant lets a node report runs of a task it
// does not execute; the retention job prunes older grants.
const runGrantTTL = 7 * 24 * time.Hour

func decodeTask(t *store.Task) (*Task, error) {
	out := &Task{ProjectID: t.ProjectID, Executors: t.Executors, Selector: t.Selector, Selected: t.Selected, Status: t.Status, RunCount: t.RunCount, LastResult: t.LastResult,
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Version: t.Version, Runnable: true}
	if err := json.Unmarshal([]byte(t.Spec), &out.TaskDef); err != nil {
		return nil, fmt.Errorf("master: task %s: stored definition: %w", t.ID, err)
	}
	out.ID = t.ID
	if err := json.Unmarshal([]byte(t.Keepers), &out.Keepers); err != nil {
		return nil, fmt.Errorf("master: task %s: keepers: %w", t.ID, err)
	}
	if err := json.Unmarshal([]byte(t.Children), &out.Children); err != nil {
		return nil, fmt.Errorf("master: task %s: children: %w", t.ID, err)
	}
	for _, l := range []*[]string{&out.Executors, &out.Selected, &out.Keepers, &out.Children} {
		if *l == nil {
			*l = []string{}
		}
	}
	if !t.LastRunAt.IsZero() {
		lr := t.LastRunAt.UTC()
		out.LastRunAt = &lr
	}
	if t.Status == store.TaskRunning {
		if plan, err := protocol.NewPlan(&out.TaskDef); err == nil {
			if next, ok := plan.Next(time.Now()); ok {
				out.NextRunAt = &next
			}
		}
	}
	return out, nil
}

func mapTaskErr(err error, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return Errorf(KindNotFound, "task %s does not exist", id)
	case errors.Is(err, store.ErrConflict):
		return Errorf(KindState, "task %s changed state meanwhile; reload and retry", id)
	}
	return fmt.Errorf("master: task %s: %w", id, err)
}

// taskNotFound is the answer about a task that does not exist, and about
// one of a project whoever asks may not read.
func taskNotFound(id string) error { return Errorf(KindNotFound, "task %s does not exist", id) }

// Get returns one task whoever asks may read.
func (tk *Tasks) Get(ctx context.Context, id string) (*Task, error) {
	t, err := store.GetTask(ctx, tk.m.st.DB, id)
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	if err := authorize(ctx, t.ProjectID, ActRead, taskNotFound(id)); err != nil {
		return nil, err
	}
	out, err := decodeTask(t)
	if err != nil {
		return nil, err
	}
	if p, err := tk.m.projects.projectByID(ctx, t.ProjectID); err == nil {
		out.Project = p.Name
	}
	if err := tk.markStranded(ctx, []*Task{out}); err != nil {
		return nil, err
	}
	return out, nil
}

// markStranded clears Runnable on those of tasks that are running with no
// running executor, in one query for them all.
func (tk *Tasks) markStranded(ctx context.Context, tasks []*Task) error {
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		if t.Status == store.TaskRunning {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	stranded, err := store.StrandedTasks(ctx, tk.m.st.DB, ids)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		since, ok := stranded[t.ID]
		if !ok {
			continue
		}
		t.Runnable = false
		if !since.IsZero() {
			t.NotRunnableSince = &since
		}
	}
	return nil
}

// List returns a page of tasks and the total, counted up to
// ListCountCap unless f says otherwise.
func (tk *Tasks) List(ctx context.Context, f store.TaskFilter) ([]Task, int, error) {
	f.Projects = restrictProjects(ctx, f.Projects)
	f.CountLimit = countLimit(f.CountLimit)
	rows, total, err := store.ListTasks(ctx, tk.m.st.DB, f)
	if err != nil {
		return nil, 0, err
	}
	names, err := tk.m.projects.Names(ctx)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Task, 0, len(rows))
	for i := range rows {
		t, err := decodeTask(&rows[i])
		if err != nil {
			return nil, 0, err
		}
		t.Project = names[t.ProjectID]
		out = append(out, *t)
	}
	ptrs := make([]*Task, len(out))
	for i := range out {
		ptrs[i] = &out[i]
	}
	if err := tk.markStranded(ctx, ptrs); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// taskFor returns task id if whoever asks may do a to it (see authorize),
// and ctx carrying the task's project for the event log.
func (tk *Tasks) taskFor(ctx context.Context, id string, a Action) (context.Context, *Task, error) {
	t, err := tk.Get(ctx, id)
	if err != nil {
		return ctx, nil, err
	}
	ctx = withEventProject(ctx, t.ProjectID)
	if err := authorize(ctx, t.ProjectID, a, taskNotFound(id)); err != nil {
		return ctx, nil, err
	}
	return ctx, t, nil
}

// Delete stops a task everywhere and marks it deleted; its runs stay.
func (tk *Tasks) Delete(ctx context.Context, id string) (err error) {
	defer func() { tk.m.events.record(ctx, "task.delete", store.TargetTask, id, err, "") }()
	ctx, t, err := tk.taskFor(ctx, id, ActEdit)
	if err != nil {
		return err
	}
	if !TaskAllows(t.Status, TaskDelete) && TaskAllows(t.Status, TaskStop) {
		if _, err := tk.Stop(ctx, id); err != nil {
			return err
		}
	}
	defer tk.m.locks.lock("task:" + id)()
	if err := store.SetTaskStatus(ctx, tk.m.st.DB, id, taskFrom(TaskDelete), store.TaskDeleted); err != nil {
		return mapTaskErr(err, id)
	}
	tk.m.log.Info("task deleted", "task", id)
	return nil
}

// executorsText names who executes the task, for messages.
func (t *Task) executorsText() string {
	var parts []string
	if len(t.Executors) > 0 {
		parts = append(parts, "executors: "+strings.Join(t.Executors, ", "))
	}
	if t.Selector != "" {
		sel := "selector " + t.Selector
		if len(t.Selected) > 0 {
			sel += " selects " + strings.Join(t.Selected, ", ")
		} else {
			sel += " selects no worker"
		}
		parts = append(parts, sel)
	}
	if len(parts) == 0 {
		return "no executor"
	}
	return strings.Join(parts, "; ")
}
