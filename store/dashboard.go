package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// FailedRun is a failed or timed-out run as the dashboard lists it.
type FailedRun struct {
	ID         string    `bun:"id"`
	TaskID     string    `bun:"task_id"`
	TaskTitle  string    `bun:"task_title"`
	Node       string    `bun:"node"`
	StartedAt  time.Time `bun:"started_at"`
	Result     string    `bun:"result"`
	HTTPStatus int       `bun:"http_status"`
	ExitCode   *int      `bun:"exit_code"`
	// Excerpt is the start of the run's output.
	Excerpt string `bun:"excerpt"`
}

// LatestFailures returns the newest failed or timed-out runs, newest first,
// with their task's title (deleted tasks included) and an output excerpt.
// projects limits the runs (nil: every run). Each result is read on its own
// along its index in started_at order and the two are merged: one query for
// both would sort every failure ever recorded.
func LatestFailures(ctx context.Context, db bun.IDB, limit int, projects []int64) ([]FailedRun, error) {
	if limit <= 0 {
		limit = 10
	}
	rows := []FailedRun{}
	for _, result := range []string{ResultFailed, ResultTimeout} {
		var part []FailedRun
		err := runsInProjects(db.NewSelect().TableExpr("runs AS r"), "r.", projects).
			ColumnExpr("r.id, r.task_id, r.node, r.started_at, r.result, r.http_status, r.exit_code").
			ColumnExpr("COALESCE(t.title, '') AS task_title").
			ColumnExpr("SUBSTR(r.output, 1, 200) AS excerpt").
			Join("LEFT JOIN tasks AS t ON t.id = r.task_id").
			Where("r.result = ?", result).
			OrderExpr("r.started_at DESC, r.id DESC").Limit(int64(limit)).
			Scan(ctx, &part)
		if err != nil {
			return nil, fmt.Errorf("store: latest failures: %w", err)
		}
		rows = append(rows, part...)
	}
	for i := range rows {
		rows[i].StartedAt = rows[i].StartedAt.UTC()
	}
	slices.SortFunc(rows, func(a, b FailedRun) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return rows[:min(limit, len(rows))], nil
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
