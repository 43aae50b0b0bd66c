// Reads and writes of many tasks at once: a node's tasks page by page,
// tasks by id, status changes and creations of a chunk in one statement.

package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// TasksOfNodePage returns the running and paused tasks among the next
// limit tasks node executes (named or selected) whose id is after after, in
// id order, the last id looked at, and whether there are no more: a node's
// tasks read a page at a time (keyset on its executor rows), so that
// pushing 100,000 tasks never holds them all and no page costs more than
// the first.
func TasksOfNodePage(ctx context.Context, db bun.IDB, node, after string, limit int) (_ []Task, last string, done bool, err error) {
	var ids []string
	// SQLite would read the node's rows by the node index and sort them
	// all for each page; +node makes it walk the primary key from after
	// (30 ms a page at 33,000 tasks a node against 0.5 ms). MariaDB's node
	// index is in key order already.
	byNode := "node = ?"
	if db.Dialect().Name() == dialect.SQLite {
		byNode = "+node = ?"
	}
	if err := db.NewSelect().Model((*TaskExecutor)(nil)).Column("task_id").Where(byNode, node).Where("task_id > ?", after).
		OrderExpr("task_id ASC").Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return nil, "", false, fmt.Errorf("store: tasks of node %s: %w", node, err)
	}
	if len(ids) == 0 {
		return nil, after, true, nil
	}
	var tasks []Task
	// +status: the status index must not drive the read (it would visit
	// every running task for each page).
	if err := db.NewSelect().Model(&tasks).Where("id IN (?)", bun.In(ids)).
		Where("+status IN (?)", bun.In([]TaskStatus{TaskRunning, TaskPaused})).OrderExpr("id ASC").Scan(ctx); err != nil {
		return nil, "", false, fmt.Errorf("store: tasks of node %s: %w", node, err)
	}
	if err := loadExecutorsOf(ctx, db, tasks); err != nil {
		return nil, "", false, err
	}
	return tasks, ids[len(ids)-1], len(ids) < limit, nil
}

// GetTasks returns the tasks of ids that exist and are not deleted, with
// their executors, by id.
func GetTasks(ctx context.Context, db bun.IDB, ids []string) (map[string]*Task, error) {
	out := make(map[string]*Task, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		var rows []Task
		if err := db.NewSelect().Model(&rows).Where("id IN (?)", bun.In(chunk)).Where("+status <> ?", TaskDeleted).Scan(ctx); err != nil {
			return nil, fmt.Errorf("store: get tasks: %w", err)
		}
		if err := loadExecutorsOf(ctx, db, rows); err != nil {
			return nil, err
		}
		for i := range rows {
			out[rows[i].ID] = &rows[i]
		}
	}
	return out, nil
}

// errSomeMoved rolls back a chunk's status change when a task of it left
// the expected status meanwhile.
var errSomeMoved = errors.New("store: a task changed status meanwhile")

// SetTasksStatus changes the status of every task of ids that is one of
// from, in one transaction per chunk of 500, and returns the ids changed.
// A chunk whose tasks are all in from is one UPDATE; one where some are not
// (another master moved them meanwhile) is done task by task, each change
// conditional as SetTaskStatus.
func SetTasksStatus(ctx context.Context, db bun.IDB, ids []string, from []TaskStatus, to TaskStatus) ([]string, error) {
	done := make([]string, 0, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		err := RetryTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
			// +status: the rows are found by id; the status index would
			// make each chunk visit every task of the status.
			res, err := tx.NewUpdate().Model((*Task)(nil)).Set("status = ?", to).Set("updated_at = ?", time.Now().UTC()).
				Where("id IN (?)", bun.In(chunk)).Where("+status IN (?)", bun.In(from)).Exec(ctx)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || int(n) != len(chunk) {
				return errSomeMoved
			}
			return nil
		})
		if err == nil {
			done = append(done, chunk...)
			continue
		}
		if !errors.Is(err, errSomeMoved) {
			return done, fmt.Errorf("store: set tasks status: %w", err)
		}
		for _, id := range chunk {
			err := SetTaskStatus(ctx, db, id, from, to)
			switch {
			case err == nil:
				done = append(done, id)
			case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
			default:
				return done, err
			}
		}
	}
	return done, nil
}

// CreateTasks inserts tasks and their named executors, a few statements for
// them all; run it in a transaction. The executor rows go in task and name
// order (see insertExecutors).
func CreateTasks(ctx context.Context, db bun.IDB, tasks []*Task) error {
	if len(tasks) == 0 {
		return nil
	}
	now := time.Now().UTC()
	var execs []TaskExecutor
	for _, t := range tasks {
		t.CreatedAt, t.UpdatedAt = now, now
		if t.ProjectID == 0 {
			t.ProjectID = DefaultProjectID
		}
		if t.Version == 0 {
			t.Version = 1
		}
		for _, n := range slices.Sorted(slices.Values(t.Executors)) {
			execs = append(execs, TaskExecutor{TaskID: t.ID, Node: n})
		}
	}
	slices.SortFunc(execs, func(a, b TaskExecutor) int {
		if a.TaskID != b.TaskID {
			return cmp.Compare(a.TaskID, b.TaskID)
		}
		return cmp.Compare(a.Node, b.Node)
	})
	for chunk := range slices.Chunk(tasks, 100) {
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return fmt.Errorf("store: create tasks: %w", err)
		}
	}
	for chunk := range slices.Chunk(execs, 500) {
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return fmt.Errorf("store: set executors: %w", err)
		}
	}
	return nil
}

// AddEvents appends events to the event log in few statements and one
// transaction, each as AddEvent would.
func AddEvents(ctx context.Context, db bun.IDB, evs []Event) error {
	for i := range evs {
		prepareEvent(&evs[i])
	}
	// One transaction for them all: one commit, not one per statement.
	return RetryTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		for chunk := range slices.Chunk(evs, 200) {
			if _, err := tx.NewInsert().Model(&chunk).Exec(ctx); err != nil {
				return fmt.Errorf("store: add events: %w", err)
			}
		}
		return nil
	})
}

// TaskSpecsWithAnyKey returns the spec of each task of project that is not
// deleted and whose spec may hold a key, by id: a prefilter the caller
// confirms by decoding, for checking many keys at once.
func TaskSpecsWithAnyKey(ctx context.Context, db bun.IDB, project int64) (map[string]string, error) {
	var rows []struct {
		ID   string `bun:"id"`
		Spec string `bun:"spec"`
	}
	if err := db.NewSelect().TableExpr("tasks").Column("id", "spec").Where("status <> ?", TaskDeleted).Where("project_id = ?", project).
		Where("spec LIKE ? ESCAPE '!'", `%"key":"%`).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: tasks with keys: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Spec
	}
	return out, nil
}
