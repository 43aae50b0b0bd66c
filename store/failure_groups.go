package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// FailureGroup is the failures of one task, or of one delayed task topic,
// among the latest failed or timed-out runs.
type FailureGroup struct {
	// TaskID is the task; for a delayed topic, the delayed task of the
	// latest failure.
	TaskID    string
	TaskTitle string // "" for a delayed topic or a task gone for good
	// Delayed marks a group of delayed tasks: Topic and ContentKey (of the
	// latest failure) name it.
	Delayed    bool
	Topic      string
	ContentKey string
	Count      int
	// Results holds each result among the group's failures once.
	Results    []string
	LastRunID  string
	LastNode   string
	LastAt     time.Time
	LastResult string
	HTTPStatus int
	ExitCode   *int
	// Excerpt is the start of the latest failure's output.
	Excerpt string
}

// failureScanRow is one failed run as FailureGroups reads it.
type failureScanRow struct {
	ID         string    `bun:"id"`
	TaskID     string    `bun:"task_id"`
	DelayedID  *string   `bun:"delayed_id"`
	Node       string    `bun:"node"`
	StartedAt  time.Time `bun:"started_at"`
	Result     string    `bun:"result"`
	HTTPStatus int       `bun:"http_status"`
	ExitCode   *int      `bun:"exit_code"`
	TaskTitle  string    `bun:"task_title"`
	Topic      string    `bun:"topic"`
	ContentKey string    `bun:"content_key"`
}

// FailureGroups groups the failed and timed-out runs that started since
// since by task (and delayed tasks by topic), the group with the newest
// failure first, at most limit groups. It stays cheap over millions of
// runs: it reads at most scan of the newest failures of each result, in
// order of the index on runs(result, started_at), and the output of each
// group's latest failure only. complete is false when scan cut the reading
// short: the counts are then lower bounds.
// projects limits the runs (nil: every run).
func FailureGroups(ctx context.Context, db bun.IDB, since time.Time, scan, limit int, projects []int64) (groups []FailureGroup, complete bool, err error) {
	if scan <= 0 {
		scan = 1000
	}
	if limit <= 0 {
		limit = 10
	}
	var all []failureScanRow
	complete = true
	for _, result := range []string{ResultFailed, ResultTimeout} {
		var rows []failureScanRow
		err := runsInProjects(db.NewSelect().TableExpr("runs AS r"), "r.", projects).
			ColumnExpr("r.id, r.task_id, r.delayed_id, r.node, r.started_at, r.result, r.http_status, r.exit_code").
			ColumnExpr("COALESCE(t.title, '') AS task_title").
			ColumnExpr("COALESCE(d.topic, '') AS topic, COALESCE(d.content_key, '') AS content_key").
			Join("LEFT JOIN tasks AS t ON t.id = r.task_id").
			Join("LEFT JOIN delayed_tasks AS d ON d.id = r.delayed_id").
			Where("r.result = ?", result).Where("r.started_at >= ?", since.UTC()).
			OrderExpr("r.started_at DESC").Limit(int64(scan)).
			Scan(ctx, &rows)
		if err != nil {
			return nil, false, fmt.Errorf("store: failure groups: %w", err)
		}
		if len(rows) >= scan {
			complete = false
		}
		all = append(all, rows...)
	}
	slices.SortStableFunc(all, func(a, b failureScanRow) int { return b.StartedAt.Compare(a.StartedAt) })
	index := map[string]int{}
	for _, r := range all {
		key := "t:" + r.TaskID
		if r.DelayedID != nil {
			key = "d:" + r.Topic
		}
		i, ok := index[key]
		if !ok {
			if len(groups) == limit {
				continue
			}
			i = len(groups)
			index[key] = i
			groups = append(groups, FailureGroup{
				TaskID: r.TaskID, TaskTitle: r.TaskTitle, Delayed: r.DelayedID != nil, Topic: r.Topic, ContentKey: r.ContentKey,
				LastRunID: r.ID, LastNode: r.Node, LastAt: r.StartedAt.UTC(), LastResult: r.Result,
				HTTPStatus: r.HTTPStatus, ExitCode: r.ExitCode,
			})
		}
		g := &groups[i]
		g.Count++
		if !slices.Contains(g.Results, r.Result) {
			g.Results = append(g.Results, r.Result)
		}
	}
	if len(groups) == 0 {
		return groups, complete, nil
	}
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.LastRunID
	}
	var excerpts []struct {
		ID      string `bun:"id"`
		Excerpt string `bun:"excerpt"`
	}
	if err := db.NewSelect().Table("runs").Column("id").ColumnExpr("SUBSTR(output, 1, 400) AS excerpt").
		Where("id IN (?)", bun.In(ids)).Scan(ctx, &excerpts); err != nil {
		return nil, false, fmt.Errorf("store: failure groups: %w", err)
	}
	byID := map[string]string{}
	for _, e := range excerpts {
		byID[e.ID] = e.Excerpt
	}
	for i := range groups {
		groups[i].Excerpt = strings.ToValidUTF8(byID[groups[i].LastRunID], "")
	}
	return groups, complete, nil
}
