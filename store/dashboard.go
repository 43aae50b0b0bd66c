package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// Run results.
const (
	ResultSuccess = "success"
	ResultFailed  = "failed"
	ResultTimeout = "timeout"
	ResultSkipped = "skipped"
	ResultKilled  = "killed"
	// ResultRunning: a run in progress (its worker sent a start notice).
	ResultRunning = "running"
	// ResultLost: a run that was in progress when its worker went offline or
	// restarted; its final report, if it ever comes, replaces it.
	ResultLost = "lost"
)

// CountNodesByStatus returns how many nodes (master included) have each status.
func CountNodesByStatus(ctx context.Context, db bun.IDB) (map[NodeStatus]int, error) {
	var rows []struct {
		Status NodeStatus `bun:"status"`
		N      int        `bun:"n"`
	}
	err := db.NewSelect().Table("nodes").Column("status").ColumnExpr("COUNT(*) AS n").Group("status").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: count nodes: %w", err)
	}
	out := map[NodeStatus]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// CountTasksByStatus returns how many tasks (deleted ones left out) have each status.
// projects limits the count (nil: every project).
func CountTasksByStatus(ctx context.Context, db bun.IDB, projects []int64) (map[TaskStatus]int, error) {
	var rows []struct {
		Status TaskStatus `bun:"status"`
		N      int        `bun:"n"`
	}
	err := inProjects(db.NewSelect().Table("tasks").Column("status").ColumnExpr("COUNT(*) AS n").
		Where("status <> ?", TaskDeleted), "project_id", projects).Group("status").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: count tasks: %w", err)
	}
	out := map[TaskStatus]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// DayCount is how many runs with one result started on one UTC day.
type DayCount struct {
	Day    string `bun:"day"` // 2006-01-02, UTC
	Result string `bun:"result"`
	N      int    `bun:"n"`
}

// dayExpr is the UTC day of a timestamp column as YYYY-MM-DD in the dialect
// of db. Times are stored in UTC in every dialect.
func dayExpr(db bun.IDB, col string) string {
	switch db.Dialect().Name() {
	case dialect.MySQL:
		return "DATE_FORMAT(" + col + ", '%Y-%m-%d')"
	case dialect.PG:
		return "to_char(" + col + ", 'YYYY-MM-DD')"
	}
	return "strftime('%Y-%m-%d', " + col + ")"
}

// RunsPerDay counts the runs that started in [from, to) by UTC day and result,
// in one aggregate query over the index on runs(started_at).
// projects limits the runs (nil: every run).
func RunsPerDay(ctx context.Context, db bun.IDB, from, to time.Time, projects []int64) ([]DayCount, error) {
	var rows []DayCount
	day := dayExpr(db, "started_at")
	err := runsInProjects(db.NewSelect().Table("runs"), "", projects).
		ColumnExpr(day+" AS day").Column("result").ColumnExpr("COUNT(*) AS n").
		Where("started_at >= ?", from.UTC()).Where("started_at < ?", to.UTC()).
		GroupExpr(day).Group("result").OrderExpr("day ASC").
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: runs per day: %w", err)
	}
	return rows, nil
}

// noRunningExecutor is the condition, on a tasks row aliased t, that none of
// the task's executors is running (offline, disabled or gone), so a running
// task's fires cannot run anywhere.
const noRunningExecutor = "NOT EXISTS (SELECT 1 FROM task_executors AS te JOIN nodes AS n ON n.name = te.node " +
	"WHERE te.task_id = t.id AND n.status = ?)"

// StrandedTasks returns, among the tasks ids, the running ones none of whose
// executors is running, in one query for the whole list. Each maps to the
// latest updated_at among its executors: a node's updated_at moves when its
// status changes, so this is when the last executor stopped running (or was
// last changed since); zero when the task has no executor left.
func StrandedTasks(ctx context.Context, db bun.IDB, ids []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID    string       `bun:"id"`
		Since bun.NullTime `bun:"since"`
	}
	err := db.NewSelect().TableExpr("tasks AS t").
		ColumnExpr("t.id").
		ColumnExpr("(SELECT MAX(n.updated_at) FROM task_executors AS te JOIN nodes AS n ON n.name = te.node WHERE te.task_id = t.id) AS since").
		Where("t.id IN (?)", bun.In(ids)).Where("t.status = ?", TaskRunning).
		Where(noRunningExecutor, StatusRunning).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: stranded tasks: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Since.Time.UTC()
		if r.Since.IsZero() {
			out[r.ID] = time.Time{}
		}
	}
	return out, nil
}

// CountStrandedTasks counts the running tasks none of whose executors is
// running, for the dashboard.
// projects limits the count (nil: every project).
func CountStrandedTasks(ctx context.Context, db bun.IDB, projects []int64) (int, error) {
	n, err := inProjects(db.NewSelect().TableExpr("tasks AS t"), "t.project_id", projects).Where("t.status = ?", TaskRunning).
		Where(noRunningExecutor, StatusRunning).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: count stranded tasks: %w", err)
	}
	return int(n), nil
}
