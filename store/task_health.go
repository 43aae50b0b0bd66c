package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// RunPoint is what a task's health is read from: one run's start, duration
// and result, without its output.
type RunPoint struct {
	ID         string    `bun:"id"`
	TaskID     string    `bun:"task_id"`
	StartedAt  time.Time `bun:"started_at"`
	DurationMS int64     `bun:"duration_ms"`
	Result     string    `bun:"result"`
}

// lastRunsChunk is how many tasks one query of LastRuns covers: one UNION
// ALL member per task, and SQLite allows 500 members at most.
const lastRunsChunk = 100

// LastRuns returns, per task of ids, its latest n runs (newest first), in
// one query per hundred tasks. Each task is its own member of a UNION ALL
// reading idx_runs_task_started backwards and stopping after n rows, so the
// cost is about len(ids) x n rows however many runs the tasks have. (A
// ROW_NUMBER() OVER (PARTITION BY task_id ...) window would number every run
// of every task before keeping n of each.) Tasks without runs are absent.
func LastRuns(ctx context.Context, db bun.IDB, ids []string, n int) (map[string][]RunPoint, error) {
	out := make(map[string][]RunPoint, len(ids))
	if n <= 0 {
		return out, nil
	}
	for start := 0; start < len(ids); start += lastRunsChunk {
		chunk := ids[start:min(start+lastRunsChunk, len(ids))]
		var points []RunPoint
		if err := lastRunsQuery(db, chunk, n).Scan(ctx, &points); err != nil {
			return nil, fmt.Errorf("store: last runs of %d tasks: %w", len(chunk), err)
		}
		for _, p := range points {
			out[p.TaskID] = append(out[p.TaskID], p)
		}
	}
	// The members come back in order, and each in its own order, but a
	// union promises neither: sort each task's runs newest first.
	for _, ps := range out {
		sortPointsNewestFirst(ps)
	}
	return out, nil
}

// lastRunsQuery is one UNION ALL member per task: its latest n runs.
func lastRunsQuery(db bun.IDB, ids []string, n int) *bun.SelectQuery {
	var q *bun.SelectQuery
	for i, id := range ids {
		inner := db.NewSelect().Model((*Run)(nil)).Column("id", "task_id", "started_at", "duration_ms", "result").
			Where("task_id = ?", id).OrderExpr("started_at DESC, id DESC").Limit(int64(n))
		// SQLite takes ORDER BY and LIMIT in a member only inside a subquery.
		member := db.NewSelect().TableExpr("(?) AS ?", inner, bun.Ident(fmt.Sprintf("h%d", i))).ColumnExpr("*")
		if q == nil {
			q = member
		} else {
			q = q.UnionAll(member)
		}
	}
	return q
}

func sortPointsNewestFirst(ps []RunPoint) {
	slices.SortFunc(ps, func(a, b RunPoint) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}
