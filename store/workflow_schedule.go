package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// Backfill states. A backfill runs while it has runs to start or in
// progress, then is done; paused, it starts none; cancelled, its runs not
// started are cancelled.
const (
	BackfillRunning   = "running"
	BackfillPaused    = "paused"
	BackfillCancelled = "cancelled"
	BackfillDone      = "done"
)

// Backfill is a workflow (or one task, as one-step runs) run for every
// fire of its schedule in a past window. Its runs are made queued when it
// is created; the leader starts at most MaxConcurrent at once.
type Backfill struct {
	bun.BaseModel `bun:"table:backfills"`

	ID            string    `bun:"id,pk"`
	ProjectID     int64     `bun:"project_id"`
	WorkflowID    string    `bun:"workflow_id"`
	TaskID        string    `bun:"task_id"`
	Title         string    `bun:"title"`
	From          time.Time `bun:"window_from"`
	To            time.Time `bun:"window_to"`
	MaxConcurrent int       `bun:"max_concurrent"`
	NewestFirst   bool      `bun:"newest_first"`
	State         string    `bun:"state"`
	Total         int       `bun:"total"`
	CreatedBy     string    `bun:"created_by"`
	CreatedAt     time.Time `bun:"created_at"`
	EndedAt       time.Time `bun:"ended_at,nullzero"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// fireTime is a fire as stored: microseconds, which every engine keeps,
// so that a conditional update on it finds the value it read.
func fireTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// fireTimePtr is fireTime of a fire that may be none.
func fireTimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	f := fireTime(*t)
	return &f
}

// DueWorkflows lists the workflows whose schedule's next fire is at or
// before now and that are not paused, earliest first, at most limit.
func DueWorkflows(ctx context.Context, db bun.IDB, now time.Time, limit int) ([]Workflow, error) {
	var out []Workflow
	if err := db.NewSelect().Model(&out).Where("next_fire IS NOT NULL").Where("next_fire <= ?", fireTime(now)).
		Where("paused = ?", false).OrderExpr("next_fire, id").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: due workflows: %w", err)
	}
	return out, nil
}

// EarliestWorkflowFire is the earliest next fire of the workflows not
// paused, nil when none has one.
func EarliestWorkflowFire(ctx context.Context, db bun.IDB) (*time.Time, error) {
	var fires []time.Time
	if err := db.NewSelect().Model((*Workflow)(nil)).Column("next_fire").Where("next_fire IS NOT NULL").
		Where("paused = ?", false).OrderExpr("next_fire").Limit(1).Scan(ctx, &fires); err != nil {
		return nil, fmt.Errorf("store: earliest workflow fire: %w", err)
	}
	if len(fires) == 0 {
		return nil, nil
	}
	return &fires[0], nil
}

// MoveWorkflowFire moves a workflow's next fire from one fire to the next
// (nil: none left); false when it was no longer from (another master
// fired it, or an edit moved it).
func MoveWorkflowFire(ctx context.Context, db bun.IDB, id string, from time.Time, to *time.Time) (bool, error) {
	res, err := db.NewUpdate().Model((*Workflow)(nil)).Set("next_fire = ?", fireTimePtr(to)).
		Where("id = ?", id).Where("next_fire = ?", fireTime(from)).Exec(ctx)
	return changed(res, err, "move workflow fire")
}

// SetWorkflowPaused pauses or resumes a workflow's schedule, with the next
// fire it resumes at; false when it was so already.
func SetWorkflowPaused(ctx context.Context, db bun.IDB, id string, paused bool, next *time.Time) (bool, error) {
	res, err := db.NewUpdate().Model((*Workflow)(nil)).Set("paused = ?", paused).Set("next_fire = ?", fireTimePtr(next)).
		Where("id = ?", id).Where("paused = ?", !paused).Exec(ctx)
	return changed(res, err, "pause workflow")
}

// LockRow takes the row lock of one row of table in tx (MySQL and
// PostgreSQL; a SQLite transaction holds the database already), so that
// masters deciding from the same rows take turns.
func LockRow(ctx context.Context, tx bun.IDB, table, id string) error {
	if tx.Dialect().Name() == dialect.SQLite {
		return nil
	}
	if _, err := tx.NewRaw("SELECT id FROM ? WHERE id = ? FOR UPDATE", bun.Ident(table), id).Exec(ctx); err != nil {
		return fmt.Errorf("store: lock %s %s: %w", table, id, err)
	}
	return nil
}

// CountWorkflowRuns counts the runs of a workflow (not those of a
// backfill when backfill is "", else those of that backfill) in status.
func CountWorkflowRuns(ctx context.Context, db bun.IDB, workflowID, backfill, status string) (int, error) {
	q := db.NewSelect().Model((*WorkflowRun)(nil)).Where("backfill_id = ?", backfill).Where("status = ?", status)
	if backfill == "" {
		q = q.Where("workflow_id = ?", workflowID)
	}
	n, err := q.Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: count workflow runs: %w", err)
	}
	return int(n), nil
}

// QueuedWorkflowRuns lists the queued runs of a workflow (outside
// backfills when backfill is "") or of a backfill, in the order they
// start: by logical time, newest first when asked, at most limit.
func QueuedWorkflowRuns(ctx context.Context, db bun.IDB, workflowID, backfill string, newestFirst bool, limit int) ([]WorkflowRun, error) {
	var out []WorkflowRun
	order := "logical_time, id"
	if newestFirst {
		order = "logical_time DESC, id DESC"
	}
	q := db.NewSelect().Model(&out).Where("backfill_id = ?", backfill).Where("status = ?", WorkflowQueued).
		OrderExpr(order).Limit(int64(limit))
	if backfill == "" {
		q = q.Where("workflow_id = ?", workflowID)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: queued workflow runs: %w", err)
	}
	return out, nil
}

// QueuedWorkflows lists the workflows with queued runs outside backfills
// (the overlap policy queue), at most limit.
func QueuedWorkflows(ctx context.Context, db bun.IDB, limit int) ([]string, error) {
	var ids []string
	if err := db.NewSelect().Model((*WorkflowRun)(nil)).ColumnExpr("DISTINCT workflow_id").
		Where("status = ?", WorkflowQueued).Where("backfill_id = ?", "").OrderExpr("workflow_id").
		Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("store: workflows with queued runs: %w", err)
	}
	return ids, nil
}

// StartQueuedRun starts a queued run: running from now, with its steps;
// false when it was no longer queued. Run it in a transaction.
func StartQueuedRun(ctx context.Context, db bun.IDB, id string, steps []WorkflowStep) (bool, error) {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*WorkflowRun)(nil)).Set("status = ?", WorkflowRunning).Set("started_at = ?", now).
		Set("updated_at = ?", now).Where("id = ?", id).Where("status = ?", WorkflowQueued).Exec(ctx)
	if ok, err := changed(res, err, "start queued workflow run"); !ok || err != nil {
		return ok, err
	}
	for i := range steps {
		steps[i].RunID, steps[i].UpdatedAt, steps[i].State = id, now, StepPending
	}
	for start := 0; start < len(steps); start += 200 {
		chunk := steps[start:min(start+200, len(steps))]
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return false, fmt.Errorf("store: create workflow steps: %w", err)
		}
	}
	return true, nil
}

// CreateBackfill inserts a backfill and its runs (queued, no steps yet);
// run it in a transaction.
func CreateBackfill(ctx context.Context, db bun.IDB, b *Backfill, runs []WorkflowRun) error {
	now := time.Now().UTC()
	b.CreatedAt, b.UpdatedAt = now, now
	if _, err := db.NewInsert().Model(b).Exec(ctx); err != nil {
		return fmt.Errorf("store: create backfill: %w", err)
	}
	for i := range runs {
		runs[i].StartedAt, runs[i].UpdatedAt, runs[i].BackfillID = now, now, b.ID
	}
	for start := 0; start < len(runs); start += 500 {
		chunk := runs[start:min(start+500, len(runs))]
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return fmt.Errorf("store: create backfill runs: %w", err)
		}
	}
	return nil
}

// GetBackfill reads a backfill.
func GetBackfill(ctx context.Context, db bun.IDB, id string) (*Backfill, error) {
	b := new(Backfill)
	if err := db.NewSelect().Model(b).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: backfill %s: %w", id, notFound(err))
	}
	return b, nil
}

// ListBackfills lists the backfills of a workflow or a task (the other
// ""), newest first, at most limit.
func ListBackfills(ctx context.Context, db bun.IDB, workflowID, taskID string, limit int) ([]Backfill, error) {
	var out []Backfill
	if err := db.NewSelect().Model(&out).Where("workflow_id = ?", workflowID).Where("task_id = ?", taskID).
		OrderExpr("created_at DESC, id DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: backfills: %w", err)
	}
	return out, nil
}

// BackfillsIn lists the ids of backfills in state, at most limit.
func BackfillsIn(ctx context.Context, db bun.IDB, state string, limit int) ([]string, error) {
	var ids []string
	if err := db.NewSelect().Model((*Backfill)(nil)).Column("id").Where("state = ?", state).
		OrderExpr("updated_at, id").Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("store: backfills %s: %w", state, err)
	}
	return ids, nil
}

// SetBackfillState moves a backfill from one of the states in from to
// state (ended when it is cancelled or done); false when it was in none.
func SetBackfillState(ctx context.Context, db bun.IDB, id, state string, from ...string) (bool, error) {
	now := time.Now().UTC()
	q := db.NewUpdate().Model((*Backfill)(nil)).Set("state = ?", state).Set("updated_at = ?", now).
		Where("id = ?", id).Where("state IN (?)", bun.In(from))
	if state == BackfillCancelled || state == BackfillDone {
		q = q.Set("ended_at = ?", now)
	}
	res, err := q.Exec(ctx)
	return changed(res, err, "set backfill state")
}

// TouchBackfill marks a backfill as looked at now.
func TouchBackfill(ctx context.Context, db bun.IDB, id string) error {
	if _, err := db.NewUpdate().Model((*Backfill)(nil)).Set("updated_at = ?", time.Now().UTC()).
		Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("store: touch backfill %s: %w", id, err)
	}
	return nil
}

// BackfillProgress counts a backfill's runs by status.
func BackfillProgress(ctx context.Context, db bun.IDB, id string) (map[string]int, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	if err := db.NewSelect().Model((*WorkflowRun)(nil)).ColumnExpr("status, COUNT(*) AS n").
		Where("backfill_id = ?", id).GroupExpr("status").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: progress of backfill %s: %w", id, err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// BackfillRuns lists a backfill's runs that started or ended (not those
// still queued), by logical time, at most limit.
func BackfillRuns(ctx context.Context, db bun.IDB, id string, limit int) ([]WorkflowRun, error) {
	var out []WorkflowRun
	if err := db.NewSelect().Model(&out).ExcludeColumn("definition", "params").Where("backfill_id = ?", id).
		Where("status <> ?", WorkflowQueued).OrderExpr("logical_time, id").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: runs of backfill %s: %w", id, err)
	}
	return out, nil
}

// CancelQueuedRuns ends a backfill's queued runs as cancelled and returns
// how many.
func CancelQueuedRuns(ctx context.Context, db bun.IDB, backfill string) (int, error) {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*WorkflowRun)(nil)).Set("status = ?", WorkflowCancelled).Set("ended_at = ?", now).
		Set("updated_at = ?", now).Where("backfill_id = ?", backfill).Where("status = ?", WorkflowQueued).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: cancel queued runs of backfill %s: %w", backfill, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// RerunInProgress is the id of a rerun of a run that is still running or
// queued, "" when none is.
func RerunInProgress(ctx context.Context, db bun.IDB, runID string) (string, error) {
	var ids []string
	if err := db.NewSelect().Model((*WorkflowRun)(nil)).Column("id").Where("rerun_of = ?", runID).
		Where("status IN (?)", bun.In([]string{WorkflowRunning, WorkflowQueued})).Limit(1).Scan(ctx, &ids); err != nil {
		return "", fmt.Errorf("store: reruns of %s: %w", runID, err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], nil
}

// LastWorkflowRuns is each workflow's latest run (by start), of the
// workflows in ids: one query.
func LastWorkflowRuns(ctx context.Context, db bun.IDB, ids []string) (map[string]WorkflowRun, error) {
	out := make(map[string]WorkflowRun, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []WorkflowRun
	if err := db.NewRaw(`SELECT id, workflow_id, status, started_at FROM (
		SELECT id, workflow_id, status, started_at,
		ROW_NUMBER() OVER (PARTITION BY workflow_id ORDER BY started_at DESC, id DESC) AS rn
		FROM workflow_runs WHERE workflow_id IN (?)) AS t WHERE rn = 1`, bun.In(ids)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: last workflow runs: %w", err)
	}
	for _, r := range rows {
		out[r.WorkflowID] = r
	}
	return out, nil
}
