package master

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// MaxRunsPerBatch bounds one delivery of run reports.
const MaxRunsPerBatch = 1000

// IngestRuns stores a batch of run reports from node. Reports already stored
// (same run id) are skipped, so a redelivered batch is counted once. A
// successful run triggers the task's children.
func (m *Master) IngestRuns(ctx context.Context, node *store.Node, runs []worker.RunReport) (worker.RunsResponse, error) {
	if len(runs) > MaxRunsPerBatch {
		return worker.RunsResponse{}, fmt.Errorf("%w: at most %d runs per batch", ErrInvalid, MaxRunsPerBatch)
	}
	rows := make([]store.Run, 0, len(runs))
	for i := range runs {
		r := &runs[i]
		if err := r.Validate(); err != nil {
			return worker.RunsResponse{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if r.Node != node.Name {
			return worker.RunsResponse{}, fmt.Errorf("%w: run %s names node %q, sent by %q", ErrInvalid, r.ID, r.Node, node.Name)
		}
		rows = append(rows, store.Run{
			ID: r.ID, TaskID: r.TaskID, Node: r.Node, ScheduledAt: r.ScheduledAt.UTC(), StartedAt: r.StartedAt.UTC(),
			EndedAt: r.EndedAt.UTC(), DurationMS: r.DurationMS, Result: r.Result, Attempt: r.Attempt,
			HTTPStatus: r.HTTPStatus, ExitCode: r.ExitCode, Output: r.Output, Manual: r.Manual,
		})
	}
	var fresh []store.Run
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = m.st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var ierr error
			fresh, ierr = store.InsertRuns(ctx, tx, rows)
			return ierr
		})
		// Two deliveries of the same batch racing (the loser finds them stored
		// on retry), or a deadlock with a concurrent batch: run it again.
		if !errors.Is(err, store.ErrConflict) && !store.IsRetryable(err) {
			break
		}
	}
	if err != nil {
		return worker.RunsResponse{}, fmt.Errorf("master: store runs: %w", err)
	}
	var succeeded []string
	for _, r := range fresh {
		if r.Result == worker.ResultSuccess {
			succeeded = append(succeeded, r.TaskID)
		} else {
			m.notify.runFailed(r)
		}
	}
	if len(succeeded) > 0 {
		// One query for the children of every task that succeeded in this batch.
		children, err := store.ChildrenOf(ctx, m.st.DB, succeeded)
		if err != nil {
			m.log.Error("load child tasks", "err", err)
		}
		for _, r := range fresh {
			if r.Result == worker.ResultSuccess && len(children[r.TaskID]) > 0 {
				m.runChildren(r.TaskID, children[r.TaskID])
			}
		}
	}
	return worker.RunsResponse{Accepted: len(fresh), Duplicates: len(rows) - len(fresh)}, nil
}

// runChildren runs once each child of a task, in the background.
func (m *Master) runChildren(taskID string, children []string) {
	ctx := WithActor(context.Background(), "task "+taskID)
	for _, c := range children {
		go func() {
			if _, node, err := m.RunTask(ctx, c); err != nil {
				m.log.Warn("child task not started", "parent", taskID, "child", c, "err", err)
			} else {
				m.log.Info("child task started", "parent", taskID, "child", c, "node", node)
			}
		}()
	}
}

// ListRuns returns a page of a task's runs, newest first. A deleted task's
// runs stay readable; a task that never existed is not found.
func (m *Master) ListRuns(ctx context.Context, taskID string, limit, offset int) ([]store.Run, int, error) {
	runs, total, err := store.ListRuns(ctx, m.st.DB, taskID, limit, offset)
	if err != nil {
		return nil, 0, err
	}
	if total == 0 {
		if _, err := m.GetTask(ctx, taskID); err != nil {
			return nil, 0, err
		}
	}
	return runs, total, nil
}

// GetRun returns one run.
func (m *Master) GetRun(ctx context.Context, id string) (*store.Run, error) {
	r, err := store.GetRun(ctx, m.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: run %s does not exist", ErrNotFound, id)
	}
	return r, err
}
