package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// MisfireTask is what the master's misfire accounting reads of one task: its
// definition and status, the open outage window if any, and its executors'
// state.
type MisfireTask struct {
	ID        string     `bun:"id"`
	Spec      string     `bun:"spec"`
	Status    TaskStatus `bun:"status"`
	UpdatedAt time.Time  `bun:"updated_at"`
	// AccountedUntil is the task's misfire_accounted_until: zero when no
	// outage window is open.
	AccountedUntil bun.NullTime `bun:"accounted_until"`
	// Running counts the executors that are running.
	Running int `bun:"running"`
	// RunnableSince is the earliest updated_at among the running executors:
	// when the task could run again, at the latest. Zero when none runs.
	RunnableSince bun.NullTime `bun:"runnable_since"`
	// StrandedSince is the latest time among all its executors since which
	// each is down (down_since, else updated_at): when the last of them
	// stopped running, when none runs. Zero without executors.
	StrandedSince bun.NullTime `bun:"stranded_since"`
	// LastFire is the fire of the task's latest run record (manual runs
	// aside): an outage window never reaches back to a fire that has one.
	LastFire bun.NullTime `bun:"last_fire"`
}

// MisfireTasks returns the tasks the misfire accounting must look at: those
// with an outage window open, and the running ones with no running executor.
// ids, when not empty, narrows the search to those tasks. Normally it finds
// none, and the subqueries run only for what it finds.
func MisfireTasks(ctx context.Context, db bun.IDB, ids []string) ([]MisfireTask, error) {
	var rows []MisfireTask
	q := db.NewSelect().TableExpr("tasks AS t").
		ColumnExpr("t.id, t.spec, t.status, t.updated_at").
		ColumnExpr("t.misfire_accounted_until AS accounted_until").
		ColumnExpr("(SELECT COUNT(*) FROM task_executors AS te JOIN nodes AS n ON n.name = te.node WHERE te.task_id = t.id AND n.status = ?) AS running", StatusRunning).
		ColumnExpr("(SELECT MIN(n.updated_at) FROM task_executors AS te JOIN nodes AS n ON n.name = te.node WHERE te.task_id = t.id AND n.status = ?) AS runnable_since", StatusRunning).
		ColumnExpr("(SELECT MAX(COALESCE(n.down_since, n.updated_at)) FROM task_executors AS te JOIN nodes AS n ON n.name = te.node WHERE te.task_id = t.id) AS stranded_since").
		ColumnExpr("(SELECT MAX(r.scheduled_at) FROM runs AS r WHERE r.task_id = t.id AND r.manual = ?) AS last_fire", false).
		Where("t.status <> ?", TaskDeleted).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("t.misfire_accounted_until IS NOT NULL").
				WhereGroup(" OR ", func(q *bun.SelectQuery) *bun.SelectQuery {
					return q.Where("t.status = ?", TaskRunning).Where(noRunningExecutor, StatusRunning)
				})
		}).
		OrderExpr("t.id ASC")
	if len(ids) > 0 {
		q = q.Where("t.id IN (?)", bun.In(ids))
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: misfire tasks: %w", err)
	}
	for i := range rows {
		r := &rows[i]
		r.UpdatedAt = r.UpdatedAt.UTC()
		for _, nt := range []*bun.NullTime{&r.AccountedUntil, &r.RunnableSince, &r.StrandedSince, &r.LastFire} {
			if !nt.IsZero() {
				nt.Time = nt.Time.UTC()
			}
		}
	}
	return rows, nil
}

// OpenMisfireWindow opens a task's outage window at from, unless one is open
// already (ErrConflict): fires after from are missed until it closes.
func OpenMisfireWindow(ctx context.Context, db bun.IDB, taskID string, from time.Time) error {
	res, err := db.NewUpdate().Model((*Task)(nil)).Set("misfire_accounted_until = ?", from.UTC()).
		Where("id = ?", taskID).Where("misfire_accounted_until IS NULL").Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: open misfire window of task %s: %w", taskID, err)
	}
	return nil
}

// MoveMisfireWindow moves a task's open window from from to to, or closes it
// when to is zero, only while it is still at from: of two masters accounting
// for the same fires one moves it, the other gets ErrConflict and records
// nothing. Run it in the transaction that records the fires.
func MoveMisfireWindow(ctx context.Context, db bun.IDB, taskID string, from, to time.Time) error {
	q := db.NewUpdate().Model((*Task)(nil)).Where("id = ?", taskID).Where("misfire_accounted_until = ?", from.UTC())
	if to.IsZero() {
		q = q.Set("misfire_accounted_until = NULL")
	} else {
		q = q.Set("misfire_accounted_until = ?", to.UTC())
	}
	res, err := q.Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: move misfire window of task %s: %w", taskID, err)
	}
	return nil
}

// MisfireWindow returns a task's open outage window start, zero when none.
func MisfireWindow(ctx context.Context, db bun.IDB, taskID string) (time.Time, error) {
	var at bun.NullTime
	err := db.NewSelect().Model((*Task)(nil)).ColumnExpr("misfire_accounted_until").Where("id = ?", taskID).Scan(ctx, &at)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: misfire window of task %s: %w", taskID, notFound(err))
	}
	if at.IsZero() {
		return time.Time{}, nil
	}
	return at.Time.UTC(), nil
}
