package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// RunGrant lets a node report runs of a task it does not execute: it was sent
// the task to run once (run now, a child run), or was an executor until the
// task was edited, and its reports may arrive late.
type RunGrant struct {
	bun.BaseModel `bun:"table:run_grants"`

	TaskID    string    `bun:"task_id,pk"`
	Node      string    `bun:"node,pk"`
	CreatedAt time.Time `bun:"created_at"`
}

// AddRunGrant records (or refreshes) a grant for node to report runs of task.
func AddRunGrant(ctx context.Context, db bun.IDB, taskID, node string) error {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*RunGrant)(nil)).Set("created_at = ?", now).
		Where("task_id = ?", taskID).Where("node = ?", node).Exec(ctx)
	if err := affected(res, err); err == nil {
		return nil
	} else if !errors.Is(err, ErrConflict) {
		return fmt.Errorf("store: refresh run grant: %w", err)
	}
	err = mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
		_, err := db.NewInsert().Model(&RunGrant{TaskID: taskID, Node: node, CreatedAt: now}).Exec(ctx)
		return err
	})
	if err != nil && !isDuplicate(err) { // a concurrent grant of the same pair is as good
		return fmt.Errorf("store: add run grant: %w", err)
	}
	return nil
}

// DeleteRunGrantsBefore prunes grants created before cutoff and returns how many.
func DeleteRunGrantsBefore(ctx context.Context, db bun.IDB, cutoff time.Time) (int, error) {
	res, err := db.NewDelete().Model((*RunGrant)(nil)).Where("created_at < ?", cutoff.UTC()).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: prune run grants: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// ReportableTasks tells, for the task ids given, which exist (deleted tasks
// included: late reports must not be lost) and which of those node may report
// runs of: it is one of the task's executors or holds a run grant.
func ReportableTasks(ctx context.Context, db bun.IDB, node string, taskIDs []string) (exists, allowed map[string]bool, err error) {
	exists, allowed = map[string]bool{}, map[string]bool{}
	if len(taskIDs) == 0 {
		return exists, allowed, nil
	}
	var ids []string
	if err := db.NewSelect().Model((*Task)(nil)).Column("id").Where("id IN (?)", bun.In(taskIDs)).Scan(ctx, &ids); err != nil {
		return nil, nil, fmt.Errorf("store: find reported tasks: %w", err)
	}
	for _, id := range ids {
		exists[id] = true
	}
	if len(ids) == 0 {
		return exists, allowed, nil
	}
	var mine []string
	err = db.NewSelect().Model((*TaskExecutor)(nil)).Column("task_id").
		Where("node = ?", node).Where("task_id IN (?)", bun.In(ids)).Scan(ctx, &mine)
	if err != nil {
		return nil, nil, fmt.Errorf("store: find executed tasks: %w", err)
	}
	var granted []string
	err = db.NewSelect().Model((*RunGrant)(nil)).Column("task_id").
		Where("node = ?", node).Where("task_id IN (?)", bun.In(ids)).Scan(ctx, &granted)
	if err != nil {
		return nil, nil, fmt.Errorf("store: find run grants: %w", err)
	}
	for _, id := range append(mine, granted...) {
		allowed[id] = true
	}
	return exists, allowed, nil
}

// IsTaskExecutor reports whether node is one of the task's executors
// (whatever the task's status).
func IsTaskExecutor(ctx context.Context, db bun.IDB, taskID, node string) (bool, error) {
	n, err := db.NewSelect().Model((*TaskExecutor)(nil)).Where("task_id = ?", taskID).Where("node = ?", node).Count(ctx)
	if err != nil {
		return false, fmt.Errorf("store: is task executor: %w", err)
	}
	return n > 0, nil
}
