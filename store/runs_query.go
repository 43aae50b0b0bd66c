package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// RunFilter selects runs across tasks; a zero field matches every run.
type RunFilter struct {
	TaskID string
	Node   string
	Result string
	// Since and Until bound started_at: Since included, Until excluded.
	Since, Until time.Time
	Limit        int // default 50
	Offset       int
	// WithOutput loads each run's output too: the API shows it, the
	// console's tables do not need it.
	WithOutput bool
	// CountLimit stops counting the matching runs past this many (0: count
	// them all), so a live page over millions of runs stays cheap; the total
	// returned is then at most CountLimit.
	CountLimit int
}

// where applies the filter's conditions to q.
func (f *RunFilter) where(q *bun.SelectQuery) *bun.SelectQuery {
	if f.TaskID != "" {
		q = q.Where("task_id = ?", f.TaskID)
	}
	if f.Node != "" {
		q = q.Where("node = ?", f.Node)
	}
	if f.Result != "" {
		q = q.Where("result = ?", f.Result)
	}
	if !f.Since.IsZero() {
		q = q.Where("started_at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("started_at < ?", f.Until.UTC())
	}
	return q
}

// QueryRuns returns a page of the runs matching f, newest first, and how many
// match (bounded by f.CountLimit). Every filter has an index in started_at
// order (migration 20261122000009), so a page reads about a page of rows.
func QueryRuns(ctx context.Context, db bun.IDB, f RunFilter) ([]Run, int, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	runs := []Run{}
	if err := runPageQuery(db, f, &runs).Scan(ctx); err != nil {
		return nil, 0, fmt.Errorf("store: query runs: %w", err)
	}
	var total int
	if err := runCountQuery(db, f).Scan(ctx, &total); err != nil {
		return nil, 0, fmt.Errorf("store: count runs: %w", err)
	}
	return runs, total, nil
}

// runPageQuery selects the page of runs f asks for into dest.
func runPageQuery(db bun.IDB, f RunFilter, dest *[]Run) *bun.SelectQuery {
	q := f.where(db.NewSelect().Model(dest))
	if !f.WithOutput {
		q = q.ExcludeColumn("output")
	}
	return q.OrderExpr("started_at DESC, id DESC").Limit(int64(f.Limit)).Offset(int64(f.Offset))
}

// runCountQuery counts the runs matching f, stopping at f.CountLimit when set.
func runCountQuery(db bun.IDB, f RunFilter) *bun.SelectQuery {
	if f.CountLimit <= 0 {
		return f.where(db.NewSelect().Model((*Run)(nil)).ColumnExpr("COUNT(*)"))
	}
	sub := f.where(db.NewSelect().Model((*Run)(nil)).ColumnExpr("1 AS one")).Limit(int64(f.CountLimit))
	return db.NewSelect().TableExpr("(?) AS capped", sub).ColumnExpr("COUNT(*)")
}
