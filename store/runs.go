package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/uptrace/bun"
)

// Run is one run record of a task.
type Run struct {
	bun.BaseModel `bun:"table:runs"`

	ID          string    `bun:"id,pk"`
	TaskID      string    `bun:"task_id"`
	Node        string    `bun:"node"`
	ScheduledAt time.Time `bun:"scheduled_at"`
	StartedAt   time.Time `bun:"started_at"`
	EndedAt     time.Time `bun:"ended_at"`
	DurationMS  int64     `bun:"duration_ms"`
	Result      string    `bun:"result"`
	Attempt     int       `bun:"attempt"`
	HTTPStatus  int       `bun:"http_status"`
	ExitCode    *int      `bun:"exit_code"`
	Output      string    `bun:"output"`
	Manual      bool      `bun:"manual"`
	// BinaryOutput says the output held NUL bytes or invalid UTF-8, stored
	// as U+FFFD.
	BinaryOutput bool      `bun:"binary_output"`
	CreatedAt    time.Time `bun:"created_at"`
	// DelayedID names the delayed task of a run of one (TaskID holds the
	// same id); empty for the runs of tasks.
	DelayedID string `bun:"delayed_id,nullzero"`
}

// MaxFutureSkew is how far in the future a stored last run time may be before
// it counts as bogus (the worker protocol's clock skew bound).
const MaxFutureSkew = 5 * time.Minute

// InsertRuns stores the runs whose ids are new and returns those; ids already
// stored are skipped, so a batch delivered twice is counted once. Each task's
// run count and last run are updated from the new runs only; a last run time
// more than MaxFutureSkew in the future (a bogus time stored before reports were
// checked) is replaced, so it cannot freeze the task's last-run fields. The
// caller validates and sanitizes the runs. Run it in a transaction.
func InsertRuns(ctx context.Context, db bun.IDB, runs []Run) ([]Run, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	var existing []string
	if err := db.NewSelect().Model((*Run)(nil)).Column("id").Where("id IN (?)", bun.In(ids)).Scan(ctx, &existing); err != nil {
		return nil, fmt.Errorf("store: find known runs: %w", err)
	}
	known := make(map[string]bool, len(existing))
	for _, id := range existing {
		known[id] = true
	}
	now := time.Now().UTC()
	saneUntil := now.Add(MaxFutureSkew)
	fresh := make([]Run, 0, len(runs))
	for _, r := range runs {
		if known[r.ID] {
			continue
		}
		known[r.ID] = true // a batch may repeat an id
		r.CreatedAt = now
		fresh = append(fresh, r)
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if _, err := db.NewInsert().Model(&fresh).Exec(ctx); err != nil {
		if isDuplicate(err) {
			return nil, fmt.Errorf("store: insert runs: %w", ErrConflict)
		}
		return nil, fmt.Errorf("store: insert runs: %w", err)
	}
	type stat struct {
		n      int64
		last   time.Time
		result string
	}
	stats := map[string]*stat{}
	for _, r := range fresh {
		s := stats[r.TaskID]
		if s == nil {
			s = &stat{}
			stats[r.TaskID] = s
		}
		s.n++
		if r.StartedAt.After(s.last) {
			s.last, s.result = r.StartedAt, r.Result
		}
	}
	// Update the tasks in one order, so concurrent batches touching the same
	// tasks queue up instead of deadlocking.
	ids = ids[:0]
	for id := range stats {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s := stats[id]
		_, err := db.NewUpdate().Model((*Task)(nil)).
			Set("run_count = run_count + ?", s.n).
			Set("last_result = CASE WHEN last_run_at IS NULL OR last_run_at <= ? OR last_run_at > ? THEN ? ELSE last_result END", s.last.UTC(), saneUntil.UTC(), s.result).
			Set("last_run_at = CASE WHEN last_run_at IS NULL OR last_run_at < ? OR last_run_at > ? THEN ? ELSE last_run_at END", s.last.UTC(), saneUntil.UTC(), s.last.UTC()).
			Where("id = ?", id).Exec(ctx)
		if err != nil {
			return nil, fmt.Errorf("store: update task run stats: %w", err)
		}
	}
	return fresh, nil
}

// ListRuns returns a page of a task's runs, newest first, and their total.
func ListRuns(ctx context.Context, db bun.IDB, taskID string, limit, offset int) ([]Run, int, error) {
	var runs []Run
	if limit <= 0 {
		limit = 50
	}
	total, err := db.NewSelect().Model(&runs).Where("task_id = ?", taskID).
		OrderExpr("started_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("store: list runs: %w", err)
	}
	return runs, int(total), nil
}

// GetRun returns one run or ErrNotFound.
func GetRun(ctx context.Context, db bun.IDB, id string) (*Run, error) {
	r := new(Run)
	if err := db.NewSelect().Model(r).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: get run: %w", notFound(err))
	}
	return r, nil
}

// Claim is the claim of one fire of a task by one node. The table keeps its
// first name, locks, so existing databases need no migration.
type Claim struct {
	bun.BaseModel `bun:"table:locks"`

	TaskID    string    `bun:"task_id,pk"`
	FireAt    time.Time `bun:"fire_at,pk"`
	Node      string    `bun:"node"`
	CreatedAt time.Time `bun:"created_at"`
}

// ClaimFire records node as the winner of a fire unless one is recorded
// already; it returns the winner.
func ClaimFire(ctx context.Context, db bun.IDB, taskID string, fire time.Time, node string) (string, error) {
	l := &Claim{TaskID: taskID, FireAt: fire.UTC(), Node: node, CreatedAt: time.Now().UTC()}
	_, err := db.NewInsert().Model(l).Exec(ctx)
	if err == nil {
		return node, nil
	}
	if !isDuplicate(err) {
		return "", fmt.Errorf("store: claim fire: %w", err)
	}
	existing := new(Claim)
	if err := db.NewSelect().Model(existing).Where("task_id = ?", taskID).Where("fire_at = ?", fire.UTC()).Scan(ctx); err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", ErrConflict
		}
		return "", fmt.Errorf("store: read fire claim: %w", notFound(err))
	}
	return existing.Node, nil
}

// FireClaimWinner returns the node that claimed a fire, or "" when none has.
func FireClaimWinner(ctx context.Context, db bun.IDB, taskID string, fire time.Time) (string, error) {
	var nodes []string
	err := db.NewSelect().Model((*Claim)(nil)).Column("node").Where("task_id = ?", taskID).
		Where("fire_at = ?", fire.UTC()).Limit(1).Scan(ctx, &nodes)
	if err != nil {
		return "", fmt.Errorf("store: read fire claim: %w", err)
	}
	if len(nodes) == 0 {
		return "", nil
	}
	return nodes[0], nil
}

// LastClaimWinner returns the node that claimed the latest fire of a task
// before fire, or "" when none is kept: round-robin routing rotates past it.
func LastClaimWinner(ctx context.Context, db bun.IDB, taskID string, fire time.Time) (string, error) {
	var nodes []string
	err := db.NewSelect().Model((*Claim)(nil)).Column("node").Where("task_id = ?", taskID).
		Where("fire_at < ?", fire.UTC()).OrderExpr("fire_at DESC").Limit(1).Scan(ctx, &nodes)
	if err != nil {
		return "", fmt.Errorf("store: read last fire claim: %w", err)
	}
	if len(nodes) == 0 {
		return "", nil
	}
	return nodes[0], nil
}

// ClaimCountsSince counts the fires each node claimed (any task) since a
// time: least-busy routing's measure of how busy a node is lately.
func ClaimCountsSince(ctx context.Context, db bun.IDB, since time.Time) (map[string]int, error) {
	var rows []struct {
		Node string `bun:"node"`
		N    int    `bun:"n"`
	}
	err := db.NewSelect().Model((*Claim)(nil)).Column("node").ColumnExpr("COUNT(*) AS n").
		Where("created_at >= ?", since.UTC()).Group("node").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: count fire claims: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Node] = r.N
	}
	return out, nil
}

// DeleteOldClaims removes fire claims older than before.
func DeleteOldClaims(ctx context.Context, db bun.IDB, before time.Time) error {
	if _, err := db.NewDelete().Model((*Claim)(nil)).Where("fire_at < ?", before.UTC()).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete old fire claims: %w", err)
	}
	return nil
}

// DeleteRunsBefore deletes up to limit runs that started before cutoff and
// returns how many it deleted. Ids are selected first: MySQL refuses LIMIT in
// an IN subquery and SQLite lacks DELETE … LIMIT.
func DeleteRunsBefore(ctx context.Context, db bun.IDB, cutoff time.Time, limit int) (int, error) {
	var ids []string
	err := db.NewSelect().Model((*Run)(nil)).Column("id").Where("started_at < ?", cutoff.UTC()).
		OrderExpr("started_at ASC").Limit(int64(limit)).Scan(ctx, &ids)
	if err != nil {
		return 0, fmt.Errorf("store: find old runs: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := db.NewDelete().Model((*Run)(nil)).Where("id IN (?)", bun.In(ids)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: delete old runs: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
