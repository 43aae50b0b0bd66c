package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Delayed task statuses: pending → running → success | failed, or pending →
// cancelled. A failed attempt with retries left goes back to pending, and so
// does a sending whose worker died (the same attempt, another worker).
const (
	DelayedPending   = "pending"
	DelayedRunning   = "running"
	DelayedSuccess   = "success"
	DelayedFailed    = "failed"
	DelayedCancelled = "cancelled"
)

// DelayedStatuses lists every delayed task status, in order.
var DelayedStatuses = []string{DelayedPending, DelayedRunning, DelayedSuccess, DelayedFailed, DelayedCancelled}

// TargetDelayed is the event target type of delayed tasks.
const TargetDelayed = "delayed"

// DelayedTask is a row of delayed_tasks: a one-shot HTTP callback another
// application asked for. Executors and Keepers are JSON lists.
type DelayedTask struct {
	bun.BaseModel `bun:"table:delayed_tasks"`

	ID string `bun:"id,pk"`
	// ProjectID is the project the delayed task belongs to.
	ProjectID  int64   `bun:"project_id"`
	SourceApp  string  `bun:"source_app"`
	Topic      string  `bun:"topic"`
	ContentKey string  `bun:"content_key"`
	PendingKey *string `bun:"pending_key"`
	Status     string  `bun:"status"`
	// DueAt is when the callback is due; NextAt is when the leader looks at
	// the item next: its fire time while pending (DueAt, or a retry's
	// backoff), its report deadline while running.
	DueAt       time.Time `bun:"due_at"`
	NextAt      time.Time `bun:"next_at"`
	NotifyURL   string    `bun:"notify_url"`
	NotifyBody  string    `bun:"notify_body"`
	ContentType string    `bun:"content_type"`
	Retries     int       `bun:"retries"`
	// Attempts counts the attempts that came back with a result.
	Attempts int `bun:"attempts"`
	// Dispatches counts the sendings to workers; the current one is number
	// Dispatches, and its run reports name the task ID:Dispatches.
	Dispatches int    `bun:"dispatches"`
	Executors  string `bun:"executors"`
	// Selector is a label selector whose running workers may run it too.
	Selector string `bun:"selector"`
	Keepers  string `bun:"keepers"`
	// Node is the worker of the current sending while running.
	Node  string `bun:"node"`
	Claim string `bun:"claim"`
	// Late says the first sending left more than the late bound after DueAt
	// (the master was down, or no worker was running).
	Late         bool      `bun:"late"`
	LastError    string    `bun:"last_error"`
	CreatedBy    string    `bun:"created_by"`
	CreatedAt    time.Time `bun:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at"`
	FiredAt      time.Time `bun:"fired_at,nullzero"`
	DispatchedAt time.Time `bun:"dispatched_at,nullzero"`
	FinishedAt   time.Time `bun:"finished_at,nullzero"`
}

// DelayedDispatch is one sending of a delayed task to a worker: the node
// that may report its run.
type DelayedDispatch struct {
	bun.BaseModel `bun:"table:delayed_dispatches"`

	DelayedID string `bun:"delayed_id,pk"`
	Seq       int    `bun:"seq,pk"`
	Attempt   int    `bun:"attempt"`
	Node      string `bun:"node"`
	// BootID is the worker process that was sent it: another one after a
	// restart has lost it.
	BootID  string    `bun:"boot_id"`
	SentAt  time.Time `bun:"sent_at"`
	Outcome string    `bun:"outcome"`
}

// Column bounds of delayed_tasks (characters).
const (
	MaxDelayedSourceApp  = 64
	MaxDelayedTopic      = 128
	MaxDelayedContentKey = 255
	maxDelayedLastError  = 1000
)

// DelayedPendingKey is the idempotency key of a delayed task: one pending or
// running task per (project, source app, topic, content key). The default
// project's keys are those from before projects.
func DelayedPendingKey(project int64, sourceApp, topic, contentKey string) string {
	h := sha256.New()
	if project != DefaultProjectID && project != 0 {
		fmt.Fprintf(h, "project %d", project)
		h.Write([]byte{0})
	}
	for _, s := range []string{sourceApp, topic, contentKey} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CreateDelayed stores d as a new pending task, unless a pending or running
// task with the same source app, topic and content key exists: then it
// returns that one and created false. The unique pending_key decides between
// concurrent creations, on any number of masters.
func CreateDelayed(ctx context.Context, db bun.IDB, d *DelayedTask) (_ *DelayedTask, created bool, err error) {
	if d.ProjectID == 0 {
		d.ProjectID = DefaultProjectID
	}
	key := DelayedPendingKey(d.ProjectID, d.SourceApp, d.Topic, d.ContentKey)
	// Microseconds, as the columns keep them: the answer equals a later read.
	now := time.Now().UTC().Truncate(time.Microsecond)
	d.PendingKey, d.Status = &key, DelayedPending
	d.CreatedAt, d.UpdatedAt = now, now
	d.DueAt, d.NextAt = d.DueAt.UTC().Truncate(time.Microsecond), d.NextAt.UTC().Truncate(time.Microsecond)
	if d.Executors == "" {
		d.Executors = "[]"
	}
	if d.Keepers == "" {
		d.Keepers = "[]"
	}
	// The existing task may finish between a refused insert and its read:
	// then the key is free again and the next insert wins.
	for range 5 {
		err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
			_, err := db.NewInsert().Model(d).Exec(ctx)
			return err
		})
		if err == nil {
			return d, true, nil
		}
		if !isDuplicate(err) {
			return nil, false, fmt.Errorf("store: create delayed task: %w", err)
		}
		existing := new(DelayedTask)
		err = db.NewSelect().Model(existing).Where("pending_key = ?", key).Limit(1).Scan(ctx)
		if err == nil {
			return existing, false, nil
		}
		if err = notFound(err); !errors.Is(err, ErrNotFound) {
			return nil, false, fmt.Errorf("store: read pending delayed task: %w", err)
		}
	}
	return nil, false, fmt.Errorf("store: create delayed task: %w", ErrConflict)
}

// GetDelayed returns one delayed task or ErrNotFound.
func GetDelayed(ctx context.Context, db bun.IDB, id string) (*DelayedTask, error) {
	d := new(DelayedTask)
	if err := db.NewSelect().Model(d).Where("id = ?", id).Limit(1).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: get delayed task: %w", notFound(err))
	}
	return d, nil
}

// DelayedFilter selects delayed tasks for the list; empty fields match all.
type DelayedFilter struct {
	Status    string
	Topic     string
	SourceApp string
	// Projects limits the list to these projects; nil: every project.
	Projects []int64
	// After starts the page after this delayed task (keyset paging;
	// Offset is then ignored).
	After  *Cursor
	Limit  int
	Offset int
	// CountLimit stops counting the matching rows past this many (0: count
	// them all), so a list over a large estate stays cheap; the total is then
	// at most CountLimit.
	CountLimit int
}

// ListDelayed returns a page of delayed tasks, newest first, and their total.
func ListDelayed(ctx context.Context, db bun.IDB, f DelayedFilter) ([]DelayedTask, int, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		if f.Status != "" {
			q = q.Where("status = ?", f.Status)
		}
		if f.Topic != "" {
			q = q.Where("topic = ?", f.Topic)
		}
		if f.SourceApp != "" {
			q = q.Where("source_app = ?", f.SourceApp)
		}
		return inProjects(q, "project_id", f.Projects)
	}
	var out []DelayedTask
	page := filter(db.NewSelect().Model(&out))
	if f.After != nil {
		page, f.Offset = after(page, f.After, "created_at", "id", false, f.After.ID), 0
	}
	page, empty, err := pageAt[string](ctx, page, "created_at DESC, id DESC", f.Limit, f.Offset, false)
	if err == nil && !empty {
		err = page.Scan(ctx)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: list delayed tasks: %w", err)
	}
	total, known := pageTotal(f.Offset, len(out), f.Limit, f.After != nil)
	if !known {
		if total, err = countUpTo(ctx, db, filter(db.NewSelect().Model((*DelayedTask)(nil))), f.CountLimit); err != nil {
			return nil, 0, fmt.Errorf("store: count delayed tasks: %w", err)
		}
	}
	return out, total, nil
}

// CountDelayedByStatus counts the delayed tasks of each status.
// projects limits the count (nil: every project).
func CountDelayedByStatus(ctx context.Context, db bun.IDB, projects []int64) (map[string]int, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	err := inProjects(db.NewSelect().Model((*DelayedTask)(nil)).Column("status").ColumnExpr("COUNT(*) AS n"), "project_id", projects).
		Group("status").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: count delayed tasks: %w", err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// CancelDelayed moves a pending task to cancelled. A task that is not
// pending (any more) gives ErrConflict, one that does not exist ErrConflict
// too: the caller reads it to tell which.
func CancelDelayed(ctx context.Context, db bun.IDB, id string, now time.Time) error {
	res, err := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", DelayedCancelled).Set("pending_key = NULL").Set("claim = ''").
		Set("finished_at = ?", now.UTC()).Set("updated_at = ?", now.UTC()).
		Where("id = ?", id).Apply(isPending).Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: cancel delayed task %s: %w", id, err)
	}
	return nil
}

// DueDelayed returns up to limit pending tasks whose next_at comes by
// until, earliest first: the candidates of one fire batch (id, executors and
// the times; the rest is read for the rows the batch wins).
func DueDelayed(ctx context.Context, db bun.IDB, until time.Time, limit int) ([]DelayedTask, error) {
	var out []DelayedTask
	err := db.NewSelect().Model(&out).Column("id", "executors", "selector", "due_at", "next_at", "dispatches", "fired_at").
		Where("status = ?", DelayedPending).Where("next_at <= ?", until.UTC()).
		OrderExpr("next_at ASC").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: due delayed tasks: %w", err)
	}
	return out, nil
}

// CountDueDelayed counts the pending tasks whose next sending comes by
// until, up to limit (an index range of (status, next_at)).
func CountDueDelayed(ctx context.Context, db bun.IDB, until time.Time, limit int) (int, error) {
	q := db.NewSelect().Model((*DelayedTask)(nil)).Where("status = ?", DelayedPending).Where("next_at <= ?", until.UTC())
	n, err := countUpTo(ctx, db, q, limit)
	if err != nil {
		return 0, fmt.Errorf("store: count due delayed tasks: %w", err)
	}
	return n, nil
}

// OverdueDelayed returns up to limit running tasks whose report deadline
// (next_at) has passed, earliest first.
func OverdueDelayed(ctx context.Context, db bun.IDB, now time.Time, limit int) ([]DelayedTask, error) {
	var out []DelayedTask
	err := db.NewSelect().Model(&out).Column("id", "node", "attempts", "dispatches", "dispatched_at", "next_at").
		Where("status = ?", DelayedRunning).Where("next_at <= ?", now.UTC()).
		OrderExpr("next_at ASC").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: overdue delayed tasks: %w", err)
	}
	return out, nil
}

// NextDelayedAt is the earliest next_at among the tasks of a status
// (pending: the next sending; running: the next report deadline); ok is
// false when there is none. It reads one entry of the (status, next_at) index.
func NextDelayedAt(ctx context.Context, db bun.IDB, status string) (next time.Time, ok bool, err error) {
	var ts []time.Time
	err = db.NewSelect().Model((*DelayedTask)(nil)).Column("next_at").Where("status = ?", status).
		OrderExpr("next_at ASC").Limit(1).Scan(ctx, &ts)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: next delayed task: %w", err)
	}
	if len(ts) == 0 {
		return time.Time{}, false, nil
	}
	return ts[0], true, nil
}

// ClaimDelayed moves the pending tasks ids whose next_at comes by until
// (now, or a little later: the caller sends each at its time) to running on
// node, marking them with claim, in one conditional update under fence (nil:
// unconditionally). Each one's dispatch count grows by one; the first
// sending records fired_at (its due time if that is later than now) and
// whether it left after lateBefore (the due time plus the late bound). It
// returns how many it moved; ClaimedDelayed reads which. Tasks cancelled or
// claimed meanwhile are left alone, so a task is sent once however many
// masters try. A lost lease moves none and is no error.
func ClaimDelayed(ctx context.Context, db bun.IDB, ids []string, node, claim string, now, until, deadline, lateBefore time.Time, fence *Fence) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	// late is set before fired_at: MySQL evaluates SET left to right with the
	// new values, SQLite with the old ones; this order reads the old fired_at in both.
	q := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", DelayedRunning).Set("node = ?", node).Set("claim = ?", claim).
		Set("dispatches = dispatches + 1").Set("dispatched_at = ?", now.UTC()).Set("next_at = ?", deadline.UTC()).
		Set("late = CASE WHEN fired_at IS NULL THEN (CASE WHEN due_at < ? THEN ? ELSE ? END) ELSE late END", lateBefore.UTC(), true, false).
		Set("fired_at = COALESCE(fired_at, CASE WHEN due_at > ? THEN due_at ELSE ? END)", now.UTC(), now.UTC()).
		Set("updated_at = ?", now.UTC()).
		Where("id IN (?)", bun.In(ids)).Where("status = ?", DelayedPending).Where("next_at <= ?", until.UTC())
	n, err := fencedUpdate(ctx, db, fence, q)
	switch {
	case errors.Is(err, ErrLeaseLost):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: claim delayed tasks: %w", err)
	}
	return int(n), nil
}

// ClaimedDelayed returns the tasks among ids that claim moved to running.
func ClaimedDelayed(ctx context.Context, db bun.IDB, ids []string, claim string) ([]DelayedTask, error) {
	var out []DelayedTask
	if len(ids) == 0 {
		return out, nil
	}
	err := db.NewSelect().Model(&out).Where("id IN (?)", bun.In(ids)).Where("claim = ?", claim).
		Where("status = ?", DelayedRunning).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: read claimed delayed tasks: %w", err)
	}
	return out, nil
}

// DeferDelayed moves the next_at of pending tasks ids to next, with why as
// their last error (no running worker to send them to), under fence. It
// returns how many it moved (none, and no error, when the lease is lost).
func DeferDelayed(ctx context.Context, db bun.IDB, ids []string, next time.Time, why string, fence *Fence) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	q := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("next_at = ?", next.UTC()).Set("last_error = ?", clip(why, maxDelayedLastError)).
		Where("id IN (?)", bun.In(ids)).Apply(isPending)
	n, err := fencedUpdate(ctx, db, fence, q)
	switch {
	case errors.Is(err, ErrLeaseLost):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("store: defer delayed tasks: %w", err)
	}
	return int(n), nil
}

// AddDelayedDispatches records sendings; run it in the claim's transaction.
func AddDelayedDispatches(ctx context.Context, db bun.IDB, ds []DelayedDispatch) error {
	for len(ds) > 0 {
		part := ds[:min(500, len(ds))]
		ds = ds[len(part):]
		if _, err := db.NewInsert().Model(&part).Exec(ctx); err != nil {
			return fmt.Errorf("store: record delayed sendings: %w", err)
		}
	}
	return nil
}

// SetDispatchOutcome records how one sending ended.
func SetDispatchOutcome(ctx context.Context, db bun.IDB, id string, seq int, outcome string) error {
	_, err := db.NewUpdate().Model((*DelayedDispatch)(nil)).Set("outcome = ?", outcome).
		Where("delayed_id = ?", id).Where("seq = ?", seq).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: record outcome of a delayed sending: %w", err)
	}
	return nil
}

// SetDispatchOutcomes records one outcome for many sendings, given as
// sequence number → task ids (one statement per sequence number).
func SetDispatchOutcomes(ctx context.Context, db bun.IDB, bySeq map[int][]string, outcome string) error {
	for seq, ids := range bySeq {
		_, err := db.NewUpdate().Model((*DelayedDispatch)(nil)).Set("outcome = ?", outcome).
			Where("seq = ?", seq).Where("delayed_id IN (?)", bun.In(ids)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("store: record outcomes of delayed sendings: %w", err)
		}
	}
	return nil
}

// DispatchesOf returns the sendings of the given tasks to node (any node
// when ""), keyed by task id and sequence number: what node may report.
func DispatchesOf(ctx context.Context, db bun.IDB, node string, ids []string) (map[string]map[int]DelayedDispatch, error) {
	out := map[string]map[int]DelayedDispatch{}
	if len(ids) == 0 {
		return out, nil
	}
	var ds []DelayedDispatch
	q := db.NewSelect().Model(&ds).Where("delayed_id IN (?)", bun.In(ids))
	if node != "" {
		q = q.Where("node = ?", node)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: find delayed sendings: %w", err)
	}
	for _, d := range ds {
		if out[d.DelayedID] == nil {
			out[d.DelayedID] = map[int]DelayedDispatch{}
		}
		out[d.DelayedID][d.Seq] = d
	}
	return out, nil
}

// ListDispatches returns every sending of one task, in order.
func ListDispatches(ctx context.Context, db bun.IDB, id string) ([]DelayedDispatch, error) {
	var ds []DelayedDispatch
	if err := db.NewSelect().Model(&ds).Where("delayed_id = ?", id).OrderExpr("seq ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: list delayed sendings: %w", err)
	}
	return ds, nil
}

// FinishDelayed ends a running task as success or failed after the run of
// its current sending seq, seen with attempts results so far: attempts
// becomes attempts+1. A task that moved on meanwhile gives ErrConflict.
func FinishDelayed(ctx context.Context, db bun.IDB, id string, seq, attempts int, status, lastError string, now time.Time) error {
	if status != DelayedSuccess && status != DelayedFailed {
		return fmt.Errorf("store: finish delayed task as %q", status)
	}
	res, err := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", status).Set("pending_key = NULL").Set("claim = ''").
		Set("attempts = ?", attempts+1).Set("last_error = ?", clip(lastError, maxDelayedLastError)).
		Set("finished_at = ?", now.UTC()).Set("updated_at = ?", now.UTC()).
		Where("id = ?", id).Where("status = ?", DelayedRunning).Where("dispatches = ?", seq).Where("attempts = ?", attempts).Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: finish delayed task %s: %w", id, err)
	}
	return nil
}

// notFinished is the condition "pending or running" written so that SQLite
// picks the primary key, not the status index (whose "pending" range holds
// every waiting task), for statements that name the ids.
const notFinished = "status <> ? AND status <> ? AND status <> ?"

// isPending is "status = pending" written the same way, for statements that
// name the ids.
func isPending(q *bun.UpdateQuery) *bun.UpdateQuery {
	return q.Where("status <> ? AND status <> ? AND status <> ? AND status <> ?",
		DelayedRunning, DelayedSuccess, DelayedFailed, DelayedCancelled)
}

// SucceedDelayed ends a pending or running task as success: a run of an
// earlier sending (one given up as lost) reports that the callback was made
// after all, so it must not be made again.
func SucceedDelayed(ctx context.Context, db bun.IDB, id string, now time.Time) error {
	res, err := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", DelayedSuccess).Set("pending_key = NULL").Set("claim = ''").
		Set("attempts = attempts + 1").Set("last_error = ''").
		Set("finished_at = ?", now.UTC()).Set("updated_at = ?", now.UTC()).
		Where("id = ?", id).Where(notFinished, DelayedSuccess, DelayedFailed, DelayedCancelled).Exec(ctx)
	if err := affected(res, err); err != nil {
		return fmt.Errorf("store: succeed delayed task %s: %w", id, err)
	}
	return nil
}

// SucceedDelayedMany ends as success every pending or running task of ids
// (a run of one of its sendings succeeded: the callback was made), in one
// statement, and returns how many it ended.
func SucceedDelayedMany(ctx context.Context, db bun.IDB, ids []string, now time.Time) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", DelayedSuccess).Set("pending_key = NULL").Set("claim = ''").
		Set("attempts = attempts + 1").Set("last_error = ''").
		Set("finished_at = ?", now.UTC()).Set("updated_at = ?", now.UTC()).
		Where("id IN (?)", bun.In(ids)).Where(notFinished, DelayedSuccess, DelayedFailed, DelayedCancelled).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: succeed delayed tasks: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// RetryDelayed moves a running task whose current sending seq ended without
// success back to pending, to be sent again at next; attempts is the count
// seen and newAttempts the count to store (the same when the attempt did not
// run, e.g. its worker died). Under fence when given (the leader's
// reassignments); a task that moved on meanwhile gives ErrConflict.
func RetryDelayed(ctx context.Context, db bun.IDB, id string, seq, attempts, newAttempts int, next time.Time, lastError string, fence *Fence) error {
	now := time.Now().UTC()
	q := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", DelayedPending).Set("node = ''").Set("claim = ''").
		Set("attempts = ?", newAttempts).Set("next_at = ?", next.UTC()).
		Set("last_error = ?", clip(lastError, maxDelayedLastError)).Set("updated_at = ?", now).
		Where("id = ?", id).Where("status = ?", DelayedRunning).Where("dispatches = ?", seq).Where("attempts = ?", attempts)
	if err := fencedAffected(ctx, db, fence, q); err != nil {
		return fmt.Errorf("store: retry delayed task %s: %w", id, err)
	}
	return nil
}

// UnclaimDelayed gives a claimed task whose sending seq never left back to
// pending as it was: next_at as before, and, when that was its first
// sending, no fired_at and not late. Under fence.
func UnclaimDelayed(ctx context.Context, db bun.IDB, id string, seq int, next time.Time, first bool, fence *Fence) error {
	q := db.NewUpdate().Model((*DelayedTask)(nil)).
		Set("status = ?", DelayedPending).Set("node = ''").Set("claim = ''").
		Set("next_at = ?", next.UTC()).Set("updated_at = ?", time.Now().UTC())
	if first {
		q = q.Set("fired_at = NULL").Set("late = ?", false)
	}
	q = q.Where("id = ?", id).Where("status = ?", DelayedRunning).Where("dispatches = ?", seq)
	if err := fencedAffected(ctx, db, fence, q); err != nil {
		return fmt.Errorf("store: unclaim delayed task %s: %w", id, err)
	}
	return nil
}

// ExtendDelayed moves the report deadline of a running task's sending seq.
func ExtendDelayed(ctx context.Context, db bun.IDB, id string, seq int, next time.Time, fence *Fence) error {
	q := db.NewUpdate().Model((*DelayedTask)(nil)).Set("next_at = ?", next.UTC()).
		Where("id = ?", id).Where("status = ?", DelayedRunning).Where("dispatches = ?", seq)
	if err := fencedAffected(ctx, db, fence, q); err != nil {
		return fmt.Errorf("store: extend delayed task %s: %w", id, err)
	}
	return nil
}

// InsertDelayedRuns stores the run records of delayed tasks whose ids are
// new and returns those; ids already stored are skipped, so a batch
// delivered twice is counted once. Run it in the transaction that moves the
// tasks on, so a run and its effect are stored together.
func InsertDelayedRuns(ctx context.Context, db bun.IDB, runs []Run) ([]Run, error) {
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
	fresh := make([]Run, 0, len(runs))
	for _, r := range runs {
		if known[r.ID] {
			continue
		}
		known[r.ID] = true
		r.CreatedAt = now
		fresh = append(fresh, r)
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if err := fillRunProjects(ctx, db, fresh); err != nil {
		return nil, err
	}
	if _, err := db.NewInsert().Model(&fresh).Exec(ctx); err != nil {
		if isDuplicate(err) {
			return nil, fmt.Errorf("store: insert delayed runs: %w", ErrConflict)
		}
		return nil, fmt.Errorf("store: insert delayed runs: %w", err)
	}
	return fresh, nil
}

// ListDelayedRuns returns a page of one delayed task's runs, newest first,
// and their total, each with an output preview (see OutputPreviewChars).
func ListDelayedRuns(ctx context.Context, db bun.IDB, id string, limit, offset int) ([]Run, int, error) {
	if limit <= 0 {
		limit = 50
	}
	var runs []Run
	total, err := withPreview(db.NewSelect().Model(&runs).ExcludeColumn("output")).Where("delayed_id = ?", id).
		OrderExpr("started_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("store: list delayed runs: %w", err)
	}
	cutPreviews(runs)
	return runs, int(total), nil
}

// DeleteFinishedDelayedBefore deletes up to limit finished delayed tasks
// (success, failed, cancelled) that finished before cutoff, with their
// sendings, and returns how many. Their runs follow the run retention.
func DeleteFinishedDelayedBefore(ctx context.Context, db bun.IDB, cutoff time.Time, limit int) (int, error) {
	var ids []string
	err := db.NewSelect().Model((*DelayedTask)(nil)).Column("id").
		Where("status IN (?)", bun.In([]string{DelayedSuccess, DelayedFailed, DelayedCancelled})).
		Where("finished_at < ?", cutoff.UTC()).OrderExpr("finished_at ASC").Limit(int64(limit)).Scan(ctx, &ids)
	if err != nil {
		return 0, fmt.Errorf("store: find old delayed tasks: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := db.NewDelete().Model((*DelayedDispatch)(nil)).Where("delayed_id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
		return 0, fmt.Errorf("store: delete old delayed sendings: %w", err)
	}
	res, err := db.NewDelete().Model((*DelayedTask)(nil)).Where("id IN (?)", bun.In(ids)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: delete old delayed tasks: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
