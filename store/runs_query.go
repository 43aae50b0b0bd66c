package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// RunFilter selects runs across tasks; a zero field matches every run.
type RunFilter struct {
	TaskID string
	Node   string
	Result string
	// Projects limits the runs to those of tasks and delayed tasks of these
	// projects; nil: every run.
	Projects []int64
	// After starts the page after this run (keyset paging by started_at
	// and id; Offset is then ignored).
	After *Cursor
	// Since and Until bound started_at: Since included, Until excluded.
	Since, Until time.Time
	Limit        int // default 50
	Offset       int
	// Preview loads the start of each run's output (see OutputPreviewChars)
	// for the API's lists; the console's tables need none. A list never
	// loads whole outputs: GetRun reads one run's.
	Preview bool
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
	q = runsInProjects(q, "", f.Projects)
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
	offset := f.Offset
	if f.After != nil {
		offset = 0
	}
	q, empty, err := pageAt[string](ctx, runPageBase(db, f, &runs), runOrder, f.Limit, offset, false)
	if err == nil && !empty {
		err = q.Scan(ctx)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: query runs: %w", err)
	}
	if f.Preview {
		cutPreviews(runs)
	}
	total, known := pageTotal(f.Offset, len(runs), f.Limit, f.After != nil)
	if !known {
		if err = runCountQuery(db, f).Scan(ctx, &total); err != nil {
			return nil, 0, fmt.Errorf("store: count runs: %w", err)
		}
	}
	return runs, total, nil
}

// runOrder is the order of every list of runs: newest first.
const runOrder = "started_at DESC, id DESC"

// runPageQuery selects the page of runs f asks for into dest.
func runPageQuery(db bun.IDB, f RunFilter, dest *[]Run) *bun.SelectQuery {
	if f.After != nil {
		f.Offset = 0
	}
	return runPageBase(db, f, dest).OrderExpr(runOrder).Limit(int64(f.Limit)).Offset(int64(f.Offset))
}

// runPageBase selects the runs of f's page into dest: its filters and
// cursor, without the order and the bounds.
func runPageBase(db bun.IDB, f RunFilter, dest *[]Run) *bun.SelectQuery {
	q := f.where(db.NewSelect().Model(dest).ExcludeColumn("output"))
	if f.After != nil {
		q = after(q, f.After, "started_at", "id", false, f.After.ID)
	}
	if f.Preview {
		q = withPreview(q)
	}
	return q
}

// runCountQuery counts the runs matching f, stopping at f.CountLimit when set.
func runCountQuery(db bun.IDB, f RunFilter) *bun.SelectQuery {
	if f.CountLimit <= 0 {
		return f.where(db.NewSelect().Model((*Run)(nil)).ColumnExpr("COUNT(*)"))
	}
	sub := f.where(db.NewSelect().Model((*Run)(nil)).ColumnExpr("1 AS one")).Limit(int64(f.CountLimit))
	return db.NewSelect().TableExpr("(?) AS capped", sub).ColumnExpr("COUNT(*)")
}

// OutputPreviewChars is how much of a run's output a list of runs carries:
// its first 256 characters (at most 1 KiB of UTF-8), so that a page of 500
// runs with 64 KiB outputs holds some hundred KiB, not 32 MiB.
const OutputPreviewChars = 256

// withPreview selects the first OutputPreviewChars+1 characters of the
// output into the output column: the one more tells a cut output from one of
// exactly the preview's length. SUBSTR counts characters on both dialects
// (SQLite TEXT, MySQL utf8mb4), so a preview never splits one.
func withPreview(q *bun.SelectQuery) *bun.SelectQuery {
	return q.ColumnExpr("SUBSTR(?TableAlias.output, 1, ?) AS output", OutputPreviewChars+1)
}

// cutPreviews bounds each run's output preview to OutputPreviewChars
// characters and marks the ones cut.
func cutPreviews(runs []Run) {
	for i := range runs {
		r := &runs[i]
		if utf8.RuneCountInString(r.Output) <= OutputPreviewChars {
			continue
		}
		n := 0
		for j := range r.Output {
			if n == OutputPreviewChars {
				r.Output = r.Output[:j]
				break
			}
			n++
		}
		r.OutputTruncated = true
	}
}
