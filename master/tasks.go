package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Task is a task as the open API shows it.
type Task struct {
	protocol.TaskDef
	Executors  []string   `json:"executors"`
	Keepers    []string   `json:"keepers"`
	Children   []string   `json:"children"`
	Status     int        `json:"status"`
	LastRunAt  *time.Time `json:"last_run_at"`
	NextRunAt  *time.Time `json:"next_run_at"`
	RunCount   int64      `json:"run_count"`
	LastResult string     `json:"last_result"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// runGrantTTL is how long a run grant lets a node report runs of a task it
// does not execute; the retention job prunes older grants.
const runGrantTTL = 7 * 24 * time.Hour

// TaskStatusName names a task status for messages.
func TaskStatusName(s int) string {
	switch s {
	case store.TaskDeleted:
		return "deleted"
	case store.TaskStopped:
		return "stopped"
	case store.TaskRunning:
		return "running"
	case store.TaskPaused:
		return "paused"
	}
	return fmt.Sprintf("status %d", s)
}

func decodeTask(t *store.Task) (*Task, error) {
	out := &Task{Executors: t.Executors, Status: t.Status, RunCount: t.RunCount, LastResult: t.LastResult,
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
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
	for _, l := range []*[]string{&out.Executors, &out.Keepers, &out.Children} {
		if *l == nil {
			*l = []string{}
		}
	}
	if !t.LastRunAt.IsZero() {
		lr := t.LastRunAt.UTC()
		out.LastRunAt = &lr
	}
	if t.Status == store.TaskRunning {
		if next, ok := protocol.NextFire(&out.TaskDef, time.Now()); ok {
			out.NextRunAt = &next
		}
	}
	return out, nil
}

func mapTaskErr(err error, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: task %s does not exist", ErrNotFound, id)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: task %s changed state meanwhile; reload and retry", ErrState, id)
	}
	return fmt.Errorf("master: task %s: %w", id, err)
}

// GetTask returns one task.
func (m *Master) GetTask(ctx context.Context, id string) (*Task, error) {
	t, err := store.GetTask(ctx, m.st.DB, id)
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	return decodeTask(t)
}

// ListTasks returns a page of tasks and the total.
func (m *Master) ListTasks(ctx context.Context, f store.TaskFilter) ([]Task, int, error) {
	rows, total, err := store.ListTasks(ctx, m.st.DB, f)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Task, 0, len(rows))
	for i := range rows {
		t, err := decodeTask(&rows[i])
		if err != nil {
			return nil, 0, err
		}
		out = append(out, *t)
	}
	return out, total, nil
}

// DeleteTask stops a task everywhere and marks it deleted; its runs stay.
func (m *Master) DeleteTask(ctx context.Context, id string) (err error) {
	defer func() { m.event(ctx, "task.delete", store.TargetTask, id, err, "") }()
	t, err := m.GetTask(ctx, id)
	if err != nil {
		return err
	}
	if t.Status == store.TaskRunning || t.Status == store.TaskPaused {
		if _, err := m.StopTask(ctx, id); err != nil {
			return err
		}
	}
	defer m.locks.lock("task:" + id)()
	if err := store.SetTaskStatus(ctx, m.st.DB, id, []int{store.TaskStopped}, store.TaskDeleted); err != nil {
		return mapTaskErr(err, id)
	}
	m.log.Info("task deleted", "task", id)
	return nil
}
