package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// Run is one run record of a task.
type Run struct {
	bun.BaseModel `bun:"table:runs"`

	ID     string `bun:"id,pk"`
	TaskID string `bun:"task_id"`
	// ProjectID is the project of the run's task or delayed task, set by
	// InsertRuns when 0.
	ProjectID   int64     `bun:"project_id"`
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
	// Covers is, for a catch-up run, how many missed fires it stands for.
	Covers int `bun:"covers"`
	// TaskVersion is the version of the task's definition the run ran; 0
	// when unknown (a delayed task's run, a run from before versions).
	TaskVersion int `bun:"task_version"`
	// WorkflowRun and WorkflowStep name the workflow run and step a run
	// belongs to; empty for the others.
	WorkflowRun  string `bun:"workflow_run"`
	WorkflowStep string `bun:"workflow_step"`
	// DelayedID names the delayed task of a run of one (TaskID holds the
	// same id); empty for the runs of tasks.
	DelayedID string `bun:"delayed_id,nullzero"`
	// OutputTruncated says Output holds only the first OutputPreviewChars
	// characters of the output (a list's preview); never stored.
	OutputTruncated bool `bun:"-"`
}

// MaxFutureSkew is how far in the future a stored last run time may be before
// it counts as bogus (the worker protocol's clock skew bound).
const MaxFutureSkew = 5 * time.Minute

// Bounds of one multi-row statement of InsertRuns: rows, and bytes of output
// (MySQL refuses a statement longer than max_allowed_packet, 16 MiB by default
// on MariaDB, 64 MiB on MySQL 8; a run's output may be 64 KiB).
const (
	insertRunsRows  = 500
	insertRunsBytes = 4 << 20
	// statsTasks bounds the tasks of one counter UPDATE.
	statsTasks = 500
)

// InsertRuns stores the runs whose ids are new and returns those, in the
// order given; ids already stored are skipped, so a batch delivered twice is
// counted once. The runs go in with multi-row INSERTs (in id order, so
// concurrent deliveries of the same runs lock them in one order); only a
// statement that meets a stored id looks its ids up and inserts the rest.
// Each task's run count and last run are then updated from the new runs only,
// with one UPDATE per up to statsTasks tasks (see updateRunStats). The caller
// validates and sanitizes the runs. Run it in a transaction: ErrConflict means
// another delivery of the same runs committed meanwhile, and running the
// transaction again skips them.
func InsertRuns(ctx context.Context, db bun.IDB, runs []Run) ([]Run, error) {
	return InsertRunsMode(ctx, db, runs, InsertThenLookUp)
}

// StoreRuns stores the runs whose ids are new, in transactions of its own,
// and returns those (see InsertRuns). Where several writers may store the
// same runs at once (MySQL: several masters, or one master's writers), a
// transaction that meets stored runs is rolled back at once and run again
// looking them up first (InsertOrConflict, then LookUpThenInsert), so two
// deliveries of one batch queue instead of deadlocking (PostgreSQL likewise).
// SQLite has one
// writer: there the runs met are looked up in the same transaction. A
// conflict, deadlock or other retryable error costs one of RetryWhen's
// attempts.
func StoreRuns(ctx context.Context, db *bun.DB, runs []Run) ([]Run, error) {
	mode := InsertThenLookUp
	if db.Dialect().Name() != dialect.SQLite {
		// MySQL and PostgreSQL: several writers (PostgreSQL would also
		// abort the whole transaction at the duplicate key).
		mode = InsertOrConflict
	}
	var fresh []Run
	isConflict := func(err error) bool { return errors.Is(err, ErrConflict) }
	err := RetryWhen(ctx, isConflict, func(ctx context.Context) error {
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var ierr error
			fresh, ierr = InsertRunsMode(ctx, tx, runs, mode)
			return ierr
		})
		if isConflict(err) {
			// Runs stored already, or stored meanwhile by another delivery:
			// the next transaction finds them. (A deadlock or lock wait
			// timeout with a concurrent batch is a last resort: batches lock
			// their runs and their tasks in id order.)
			mode = LookUpThenInsert
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return fresh, nil
}

// RunInsertMode says how InsertRunsMode treats run ids already stored.
type RunInsertMode int

const (
	// InsertThenLookUp inserts at once; a statement that meets a stored id
	// looks its ids up and inserts the rest in the same transaction. Where
	// deliveries of the same runs never race (SQLite's single writer), it
	// saves a retry.
	InsertThenLookUp RunInsertMode = iota
	// InsertOrConflict inserts at once and gives ErrConflict when a
	// statement meets a stored id; run the transaction again with
	// LookUpThenInsert. On MySQL a failed INSERT keeps gap locks until the
	// transaction ends, and two transactions inserting the same runs after
	// such a failure deadlock on them: rolling back at once avoids that.
	InsertOrConflict
	// LookUpThenInsert looks every id up first (a plain read, no locks) and
	// inserts only the others; ErrConflict when another delivery stored one
	// of them meanwhile.
	LookUpThenInsert
)

// InsertRunsMode is InsertRuns with the given treatment of stored ids.
func InsertRunsMode(ctx context.Context, db bun.IDB, runs []Run, mode RunInsertMode) ([]Run, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	now := time.Now().UTC()
	batch := make([]Run, 0, len(runs))
	at := make(map[string]int, len(runs))
	for _, r := range runs {
		r.CreatedAt = now
		if i, dup := at[r.ID]; dup { // a batch may repeat an id
			if batch[i].Result == ResultRunning && r.Result != ResultRunning {
				batch[i] = r // a start notice and the end of its run: keep the end
			}
			continue
		}
		at[r.ID] = len(batch)
		batch = append(batch, r)
	}
	if err := fillRunProjects(ctx, db, batch); err != nil {
		return nil, err
	}
	sorted := slices.Clone(batch)
	slices.SortFunc(sorted, func(a, b Run) int { return strings.Compare(a.ID, b.ID) })
	stored := make(map[string]bool, len(batch)) // ids this call inserted
	for len(sorted) > 0 {
		n, size := 0, 0
		for n < len(sorted) && n < insertRunsRows && (n == 0 || size+len(sorted[n].Output) <= insertRunsBytes) {
			size += len(sorted[n].Output) + 256
			n++
		}
		chunk := sorted[:n]
		sorted = sorted[n:]
		inserted, err := insertNewRuns(ctx, db, chunk, mode)
		if err != nil {
			return nil, err
		}
		for _, r := range inserted {
			stored[r.ID] = true
		}
	}
	fresh := batch[:0]
	for _, r := range batch {
		if stored[r.ID] {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	ended := fresh
	if slices.ContainsFunc(fresh, func(r Run) bool { return r.Result == ResultRunning }) {
		ended = slices.DeleteFunc(slices.Clone(fresh), func(r Run) bool { return r.Result == ResultRunning })
	}
	if err := updateRunStats(ctx, db, ended, now); err != nil {
		return nil, err
	}
	return fresh, nil
}

// insertNewRuns inserts rows with one statement and returns those inserted.
// A duplicate key fails the statement only (both MySQL and SQLite undo just
// that statement, the transaction goes on; on PostgreSQL the statement runs
// in a savepoint for that, see mayFail): then the stored ids are looked up
// and the others inserted. Plain INSERT rather than INSERT IGNORE, which would
// also turn a real error (a value too long) into a warning and a cut value.
func insertNewRuns(ctx context.Context, db bun.IDB, rows []Run, mode RunInsertMode) ([]Run, error) {
	// bun would add RETURNING exit_code (a nil pointer is inserted as
	// DEFAULT) and read back a row per run: Returning("NULL") drops it. bun
	// also empties the slice it was given when the statement fails: give it
	// a copy of the slice header.
	ins := rows
	if mode != LookUpThenInsert {
		err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
			_, err := db.NewInsert().Model(&ins).Returning("NULL").Exec(ctx)
			return err
		})
		if err == nil {
			return rows, nil
		}
		if !isDuplicate(err) {
			return nil, fmt.Errorf("store: insert runs: %w", err)
		}
		if mode == InsertOrConflict {
			return nil, fmt.Errorf("store: insert runs: some are stored already: %w", ErrConflict)
		}
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	var existing []struct {
		ID      string `bun:"id"`
		Result  string `bun:"result"`
		Attempt int    `bun:"attempt"`
	}
	if err := db.NewSelect().Model((*Run)(nil)).Column("id", "result", "attempt").Where("id IN (?)", bun.In(ids)).Scan(ctx, &existing); err != nil {
		return nil, fmt.Errorf("store: find known runs: %w", err)
	}
	known := make(map[string]bool, len(existing)) // id: its stored run may be replaced
	for _, e := range existing {
		known[e.ID] = e.Result == ResultRunning || e.Result == ResultLost || (e.Result == ResultSkipped && e.Attempt == UnrunClaimAttempt)
	}
	rest := make([]Run, 0, len(rows)-len(existing))
	var ended []Run // final reports of runs stored as in progress, lost or unrun
	for _, r := range rows {
		replaceable, ok := known[r.ID]
		switch {
		case !ok:
			rest = append(rest, r)
		case r.Result != ResultRunning && replaceable:
			ended = append(ended, r)
		}
	}
	var done []Run
	if len(rest) > 0 {
		ins = rest
		if _, err := db.NewInsert().Model(&ins).Returning("NULL").Exec(ctx); err != nil {
			if isDuplicate(err) {
				// Stored by a concurrent delivery since the lookup.
				return nil, fmt.Errorf("store: insert runs: %w", ErrConflict)
			}
			return nil, fmt.Errorf("store: insert runs: %w", err)
		}
		done = rest
	}
	for _, r := range ended {
		ok, err := endRun(ctx, db, &r)
		if err != nil {
			return nil, err
		}
		if ok {
			done = append(done, r)
		}
	}
	return done, nil
}

// endRun replaces a run stored in progress (or lost, or recorded unrun by
// RecordUnrunClaims) with its final report,
// only from the node that ran it. It is a conditional update: a concurrent
// delivery that ended it first wins, and this one counts as a duplicate; so
// does a report of another node's run.
func endRun(ctx context.Context, db bun.IDB, r *Run) (bool, error) {
	cols := []string{"scheduled_at", "started_at", "ended_at", "duration_ms", "result", "attempt", "http_status",
		"exit_code", "output", "manual", "binary_output", "covers"}
	if r.TaskVersion != 0 {
		// A final report that does not know the version (a command killed
		// after its worker's restart) keeps the one its start said.
		cols = append(cols, "task_version")
	}
	res, err := db.NewUpdate().Model(r).Column(cols...).
		WherePK().Where("node = ?", r.Node).Where("task_id = ?", r.TaskID).
		WhereGroup(" AND ", func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Where("result IN (?)", bun.In([]string{ResultRunning, ResultLost})).
				WhereOr("result = ? AND attempt = ?", ResultSkipped, UnrunClaimAttempt)
		}).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return false, nil
		}
		return false, fmt.Errorf("store: end run %s: %w", r.ID, err)
	}
	return true, nil
}

// LoseRunsOf marks the runs in progress on node as lost: it went offline or
// restarted, so they will not end as reported. It also records as lost the
// fires node claimed, due by now, whose run it has not reported (by the run
// id its claim named): a run too short for a start notice would otherwise
// die unseen with a killed worker. A final report that arrives later (a
// worker cut off, not dead, or restarted with its journal) still replaces
// them. It returns how many runs it marked or recorded.
func LoseRunsOf(ctx context.Context, db bun.IDB, node, why string) (int, error) {
	now := time.Now().UTC()
	output := why + "; the run's result is unknown (a report that arrives later replaces this)"
	res, err := db.NewUpdate().Model((*Run)(nil)).
		Set("result = ?", ResultLost).Set("ended_at = ?", now).Set("output = ?", output).
		Where("node = ?", node).Where("result = ?", ResultRunning).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: mark runs of %q lost: %w", node, err)
	}
	n, _ := res.RowsAffected()
	unreported, err := loseUnreportedClaims(ctx, db, node, output, now)
	return int(n) + unreported, err
}

// loseUnreportedClaims records a lost run for each fire node claimed, due
// by now, with no run under the id its claim named. One statement; a report
// stored concurrently makes it fail on the duplicate id, and the next
// attempt leaves that fire out.
func loseUnreportedClaims(ctx context.Context, db bun.IDB, node, output string, now time.Time) (int, error) {
	for attempt := 1; ; attempt++ {
		var res sql.Result
		err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
			var err error
			res, err = db.NewRaw(`INSERT INTO runs (id, task_id, node, scheduled_at, started_at, ended_at, duration_ms,
			result, attempt, http_status, output, manual, binary_output, created_at, covers)
			SELECT c.run_id, c.task_id, c.node, c.fire_at, c.fire_at, ?, 0, ?, 1, 0, ?, ?, ?, ?, 0
			FROM locks AS c WHERE c.node = ? AND c.run_id <> '' AND c.fire_at <= ?
			AND NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.id = c.run_id)`,
				now, ResultLost, output, false, false, now, node, now).Exec(ctx)
			return err
		})
		if err == nil {
			n, _ := res.RowsAffected()
			return int(n), nil
		}
		if !isDuplicate(err) || attempt == 3 {
			return 0, fmt.Errorf("store: record unreported claimed runs of %q lost: %w", node, err)
		}
	}
}

// runStat is what a batch adds to one task's counters.
type runStat struct {
	id     string
	n      int64
	last   time.Time
	result string
}

// updateRunStats adds fresh runs to their tasks' run count and last run, with
// one UPDATE per statsTasks tasks that joins the tasks to a list of their new
// values (SQLite and PostgreSQL: UPDATE … FROM (VALUES …); MySQL: a
// multi-table UPDATE over a UNION ALL derived table). A last run time more than MaxFutureSkew in the
// future (a bogus time stored before reports were checked) is replaced, so it
// cannot freeze the task's last-run fields. The list is in task id order and
// read first (STRAIGHT_JOIN), each task row found by primary key, so
// concurrent batches touching the same tasks lock them in one order and queue
// instead of deadlocking; on PostgreSQL the rows are locked in id order by a
// SELECT … FOR UPDATE first.
func updateRunStats(ctx context.Context, db bun.IDB, fresh []Run, now time.Time) error {
	idx := map[string]int{}
	var stats []runStat
	for _, r := range fresh {
		i, ok := idx[r.TaskID]
		if !ok {
			i = len(stats)
			idx[r.TaskID] = i
			stats = append(stats, runStat{id: r.TaskID})
		}
		s := &stats[i]
		s.n++
		if r.StartedAt.After(s.last) {
			s.last, s.result = r.StartedAt.UTC(), r.Result
		}
	}
	slices.SortFunc(stats, func(a, b runStat) int { return strings.Compare(a.id, b.id) })
	saneUntil := now.Add(MaxFutureSkew)
	mysql := db.Dialect().Name() == dialect.MySQL
	// PostgreSQL types a VALUES list from its values: the times are cast, or
	// they would be text; the counts are bigint like run_count.
	row := "(?, ?, ?, ?)"
	if isPostgres(db) {
		row = "(?, CAST(? AS BIGINT), CAST(? AS TIMESTAMP), ?)"
	}
	// The stored last run is replaced when older than the batch's (or equal,
	// for the result) or bogus. MySQL may assign a multi-table UPDATE's
	// columns in any order: last_result's test holds whether last_run_at is
	// already assigned or not.
	const set = "last_result = CASE WHEN %[1]slast_run_at IS NULL OR %[1]slast_run_at <= %[2]s OR %[1]slast_run_at > ? THEN %[3]s ELSE %[1]slast_result END, " +
		"%[1]slast_run_at = CASE WHEN %[1]slast_run_at IS NULL OR %[1]slast_run_at < %[2]s OR %[1]slast_run_at > ? THEN %[2]s ELSE %[1]slast_run_at END, " +
		"%[1]srun_count = %[1]srun_count + %[4]s"
	for len(stats) > 0 {
		part := stats[:min(statsTasks, len(stats))]
		stats = stats[len(part):]
		var list strings.Builder
		args := make([]any, 0, 4*len(part))
		for i, s := range part {
			switch {
			case !mysql && i == 0:
				list.WriteString(row)
			case !mysql:
				list.WriteString(", " + row)
			case i == 0:
				list.WriteString("SELECT ? AS id, ? AS n, CAST(? AS DATETIME(6)) AS l, ? AS r")
			default:
				list.WriteString(" UNION ALL SELECT ?, ?, CAST(? AS DATETIME(6)), ?")
			}
			args = append(args, s.id, s.n, s.last, s.result)
		}
		if isPostgres(db) {
			// PostgreSQL locks the rows an UPDATE … FROM joins in the
			// order its plan meets them (a hash join: the table's
			// physical order, which updates change), not the list's:
			// two batches over the same tasks then deadlocked now and
			// then. Lock them in id order first; the UPDATE then waits
			// for nothing it does not hold.
			ids := make([]string, len(part))
			for i, s := range part {
				ids[i] = s.id
			}
			if _, err := db.NewRaw("SELECT id FROM tasks WHERE id IN (?) ORDER BY id FOR UPDATE", bun.In(ids)).Exec(ctx); err != nil {
				return fmt.Errorf("store: lock tasks for their run stats: %w", err)
			}
		}
		// The placeholders of SET follow the list on MySQL, precede it on
		// SQLite and PostgreSQL.
		var q string
		if mysql {
			q = "UPDATE (" + list.String() + ") AS v STRAIGHT_JOIN tasks AS t ON t.id = v.id SET t." +
				fmt.Sprintf(set, "t.", "v.l", "v.r", "v.n")
			args = append(args, saneUntil, saneUntil)
		} else {
			q = "UPDATE tasks SET " + fmt.Sprintf(set, "", "v.column3", "v.column4", "v.column2") +
				" FROM (VALUES " + list.String() + ") AS v WHERE tasks.id = v.column1"
			args = append([]any{saneUntil, saneUntil}, args...)
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: update task run stats: %w", err)
		}
	}
	return nil
}

// ReportTarget is what ingesting a node's run reports needs to know of a task.
type ReportTarget struct {
	// Allowed: the node is one of the task's executors or holds a run grant.
	Allowed bool
	// Children are the task's child tasks, none when the task is deleted.
	Children []string
}

// ReportTargets returns, for the task ids given, those that exist (deleted
// tasks included: late reports must not be lost) with whether node may
// report runs of them and their children, in one query.
func ReportTargets(ctx context.Context, db bun.IDB, node string, taskIDs []string) (map[string]ReportTarget, error) {
	out := make(map[string]ReportTarget, len(taskIDs))
	if len(taskIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		ID       string     `bun:"id"`
		Status   TaskStatus `bun:"status"`
		Children string     `bun:"children"`
		Executes int        `bun:"executes"`
		Granted  int        `bun:"granted"`
	}
	err := db.NewSelect().TableExpr("tasks AS t").Column("t.id", "t.status", "t.children").
		ColumnExpr("CASE WHEN EXISTS (SELECT 1 FROM task_executors AS e WHERE e.task_id = t.id AND e.node = ?) THEN 1 ELSE 0 END AS executes", node).
		ColumnExpr("CASE WHEN EXISTS (SELECT 1 FROM run_grants AS g WHERE g.task_id = t.id AND g.node = ?) THEN 1 ELSE 0 END AS granted", node).
		Where("t.id IN (?)", bun.In(taskIDs)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: find reported tasks: %w", err)
	}
	for _, r := range rows {
		t := ReportTarget{Allowed: r.Executes != 0 || r.Granted != 0}
		if r.Status != TaskDeleted && r.Children != "" && r.Children != "[]" {
			if err := json.Unmarshal([]byte(r.Children), &t.Children); err != nil {
				t.Children = nil // a broken list starts nothing, as ChildrenOf
			}
		}
		out[r.ID] = t
	}
	return out, nil
}

// ListRuns returns a page of a task's runs, newest first, and their total,
// each with an output preview (see OutputPreviewChars), never its whole output.
func ListRuns(ctx context.Context, db bun.IDB, taskID string, limit, offset int) ([]Run, int, error) {
	var runs []Run
	if limit <= 0 {
		limit = 50
	}
	total, err := withPreview(db.NewSelect().Model(&runs).ExcludeColumn("output")).Where("task_id = ?", taskID).
		OrderExpr("started_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("store: list runs: %w", err)
	}
	cutPreviews(runs)
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
	// RunID is the report id the winner gives the fire's first report (""
	// from older workers); see LoseRunsOf.
	RunID string `bun:"run_id"`
}

// ClaimFire records node as the winner of a fire unless one is recorded
// already, with runID, the id its first report will carry; it returns the
// winner. Outside a transaction the insert is run
// again after a retryable error (Retry). When the database keeps refusing it
// as a deadlock, which is how Galera reports a claim that lost certification
// to another node's claim of the same fire, it counts as a lost race: the
// winner when it can be read already, else "" (the claimant does not run
// the fire). Other errors that persist (a Galera node that is not ready)
// are errors, so the claimant asks another master.
func ClaimFire(ctx context.Context, db bun.IDB, taskID string, fire time.Time, node, runID string) (string, error) {
	if isTx(db) {
		return claimFire(ctx, db, taskID, fire, node, runID)
	}
	var winner string
	err := Retry(ctx, func(ctx context.Context) error {
		var err error
		winner, err = claimFire(ctx, db, taskID, fire, node, runID)
		return err
	})
	if err != nil && ctx.Err() == nil && isLostToConcurrentWrite(err) {
		return winnerAfterConflict(ctx, db, taskID, fire)
	}
	return winner, err
}

// winnerPoll and winnerWait bound the reads of a fire's winner after a
// claim lost to a concurrent write that this node has not applied yet.
const (
	winnerPoll = 5 * time.Millisecond
	winnerWait = 2 * time.Second
)

// winnerAfterConflict reads the winner of a fire whose claim lost to a
// concurrent claim: a loser is always told who won. On Galera the losing
// node may not have applied the winner's insert yet when its own write
// fails certification, so the read is causal (wsrep_sync_wait: it waits
// until this node has applied what the cluster committed before it); on
// every engine the read is repeated briefly should it still find nothing.
// When no winner appears (both writes were rolled back) it is an error, so
// the claimant asks again rather than taking "nobody" for an answer.
func winnerAfterConflict(ctx context.Context, db bun.IDB, taskID string, fire time.Time) (string, error) {
	if db.Dialect().Name() == dialect.MySQL {
		var nodes []string
		err := db.NewRaw("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT node FROM locks WHERE task_id = ? AND fire_at = ?",
			taskID, fire.UTC()).Scan(ctx, &nodes)
		switch {
		case err == nil && len(nodes) > 0:
			return nodes[0], nil
		case err != nil && !isUnsupportedStatement(err):
			return "", fmt.Errorf("store: read fire claim: %w", err)
		}
	}
	deadline := time.Now().Add(winnerWait)
	for {
		w, err := FireClaimWinner(ctx, db, taskID, fire)
		if err != nil || w != "" {
			return w, err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("store: claim fire: lost to a concurrent claim whose winner is not recorded: %w", ErrConflict)
		}
		t := time.NewTimer(winnerPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// claimFire is one attempt of ClaimFire.
func claimFire(ctx context.Context, db bun.IDB, taskID string, fire time.Time, node, runID string) (string, error) {
	l := &Claim{TaskID: taskID, FireAt: fire.UTC(), Node: node, CreatedAt: time.Now().UTC(), RunID: runID}
	err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
		_, err := db.NewInsert().Model(l).Exec(ctx)
		return err
	})
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

// GetFireClaim returns the claim of a fire, or nil when none is recorded.
func GetFireClaim(ctx context.Context, db bun.IDB, taskID string, fire time.Time) (*Claim, error) {
	var claims []Claim
	err := db.NewSelect().Model(&claims).Where("task_id = ?", taskID).Where("fire_at = ?", fire.UTC()).Limit(1).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: read fire claim: %w", err)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	return &claims[0], nil
}

// SetClaimRun makes node's claim of a fire name runID, the report id of the
// run it will report for it now.
func SetClaimRun(ctx context.Context, db bun.IDB, taskID string, fire time.Time, node, runID string) error {
	_, err := db.NewUpdate().Model((*Claim)(nil)).Set("run_id = ?", runID).
		Where("task_id = ?", taskID).Where("fire_at = ?", fire.UTC()).Where("node = ?", node).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: name the run of a fire claim: %w", err)
	}
	return nil
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

// UnrunClaimAttempt is the attempt of the skipped run that stands for a
// won claim whose winner reported no run (RecordUnrunClaims): no report of
// a worker has it (attempts count from 1), so a late report of that run
// still replaces it.
const UnrunClaimAttempt = 0

// UnreportedClaim is a won claim of a fire whose winner has reported no run
// under the run id its claim named, with its task's definition.
type UnreportedClaim struct {
	TaskID string    `bun:"task_id"`
	FireAt time.Time `bun:"fire_at"`
	Node   string    `bun:"node"`
	RunID  string    `bun:"run_id"`
	Spec   string    `bun:"spec"`
}

// ClaimCursor is a position in the claims ordered by fire and task.
type ClaimCursor struct {
	FireAt time.Time
	TaskID string
}

// UnreportedClaims returns up to limit won claims after the cursor and with
// fires at or before until, in fire then task order, whose winner has
// reported no run under the claim's run id. Claims of older workers (no run
// id) are left out: their runs cannot be matched.
func UnreportedClaims(ctx context.Context, db bun.IDB, after ClaimCursor, until time.Time, limit int) ([]UnreportedClaim, error) {
	var rows []UnreportedClaim
	q := db.NewSelect().TableExpr("locks AS c").
		ColumnExpr("c.task_id, c.fire_at, c.node, c.run_id, t.spec").
		Join("JOIN tasks AS t ON t.id = c.task_id").
		Where("c.run_id <> ''").Where("c.fire_at <= ?", until.UTC()).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("c.fire_at > ?", after.FireAt.UTC()).
				WhereOr("c.fire_at = ? AND c.task_id > ?", after.FireAt.UTC(), after.TaskID)
		}).
		Where("NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.id = c.run_id)").
		OrderExpr("c.fire_at ASC, c.task_id ASC").Limit(int64(limit))
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: unreported claims: %w", err)
	}
	for i := range rows {
		rows[i].FireAt = rows[i].FireAt.UTC()
	}
	return rows, nil
}

// RunsExist returns which of the run ids are stored.
func RunsExist(ctx context.Context, db bun.IDB, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	for len(ids) > 0 {
		part := ids[:min(len(ids), 500)]
		ids = ids[len(part):]
		var found []string
		if err := db.NewSelect().Model((*Run)(nil)).Column("id").Where("id IN (?)", bun.In(part)).Scan(ctx, &found); err != nil {
			return nil, fmt.Errorf("store: find runs: %w", err)
		}
		for _, id := range found {
			out[id] = true
		}
	}
	return out, nil
}

// ClaimStillUnreported reports whether c still stands as read: the claim
// still names c's run id (its winner did not claim the fire again under
// another id) and no run has that id.
func ClaimStillUnreported(ctx context.Context, db bun.IDB, c UnreportedClaim) (bool, error) {
	n, err := db.NewSelect().TableExpr("locks AS c").
		Where("c.task_id = ?", c.TaskID).Where("c.fire_at = ?", c.FireAt.UTC()).Where("c.run_id = ?", c.RunID).
		Where("NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.id = c.run_id)").Count(ctx)
	if err != nil {
		return false, fmt.Errorf("store: check unreported claim: %w", err)
	}
	return n > 0, nil
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

// fillRunProjects sets the project of the runs that have none from their
// task or delayed task: one lookup per table for the whole batch. A run whose
// task is unknown stays in the default project.
func fillRunProjects(ctx context.Context, db bun.IDB, runs []Run) error {
	var tasks, delayed []string
	for _, r := range runs {
		switch {
		case r.ProjectID != 0:
		case r.DelayedID != "":
			delayed = append(delayed, r.DelayedID)
		default:
			tasks = append(tasks, r.TaskID)
		}
	}
	projects := map[string]int64{}
	for _, look := range []struct {
		table string
		ids   []string
	}{{"tasks", tasks}, {"delayed_tasks", delayed}} {
		if len(look.ids) == 0 {
			continue
		}
		slices.Sort(look.ids)
		var rows []struct {
			ID        string `bun:"id"`
			ProjectID int64  `bun:"project_id"`
		}
		if err := db.NewSelect().Table(look.table).Column("id", "project_id").Where("id IN (?)", bun.In(slices.Compact(look.ids))).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("store: projects of runs: %w", err)
		}
		for _, r := range rows {
			projects[r.ID] = r.ProjectID
		}
	}
	for i := range runs {
		if runs[i].ProjectID != 0 {
			continue
		}
		id := runs[i].TaskID
		if runs[i].DelayedID != "" {
			id = runs[i].DelayedID
		}
		runs[i].ProjectID = projects[id]
		if runs[i].ProjectID == 0 {
			runs[i].ProjectID = DefaultProjectID
		}
	}
	return nil
}
