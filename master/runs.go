package master

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/uptrace/bun"
)

// MaxRunsPerBatch bounds one delivery of run reports (see
// protocol.MaxRunsBatchBytes for its bytes).
const MaxRunsPerBatch = protocol.MaxRunsPerBatch

// Bounds of concurrent ingest: at most IngestSlots batches are read and
// stored at once, each holding at most protocol.MaxRunsBatchBytes of
// reports, so ingest holds some tens of MB whatever the workers send. One
// more waits up to ingestSlotWait for a slot, then is refused (KindBusy) and
// its worker delivers it again after IngestRetryAfter, keeping it meanwhile.
const (
	IngestSlots      = 4
	ingestSlotWait   = 2 * time.Second
	IngestRetryAfter = 2 * time.Second
)

// runIngest stores the run reports workers send: it bounds and decodes
// batches, checks each run, scrubs secrets from outputs, group-commits the
// rows with the other batches being stored, and acts on what ended (failure
// notices, child tasks, catch-up events).
type runIngest struct {
	db       *bun.DB // the whole database: a round runs its own transactions
	dialect  store.Dialect
	log      *slog.Logger
	life     *lifecycle
	events   *eventLog
	metrics  *Metrics
	notify   *notifier
	delayed  *DelayedTasks
	runLists *slots
	group    *ingestGroup
	getTask  func(ctx context.Context, id string) (*Task, error)
	runTask  func(ctx context.Context, id string) (*Task, string, error)
	// stepsReported records stored runs of workflow steps and moves their
	// workflow run on.
	stepsReported func(ctx context.Context, runs []store.Run)
}

// IngestBatch reads a batch of run reports from a worker and stores it (see
// runIngest.batch).
func (rs *Runs) IngestBatch(ctx context.Context, node *store.Node, body io.Reader, size int64) (protocol.RunsResponse, error) {
	return rs.m.ingester.batch(ctx, node, body, size)
}

// Ingest stores a batch of run reports from node (see runIngest.reports).
func (rs *Runs) Ingest(ctx context.Context, node *store.Node, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	return rs.m.ingester.reports(ctx, node, runs)
}

// batch reads a batch of run reports from body (a RunsRequest) and
// stores it with Runs.Ingest. The body is decoded run by run while it is read
// (protocol.DecodeRunsRequest), under one of IngestSlots slots: a batch over
// protocol.MaxRunsPerBatch runs or protocol.MaxRunsBatchBytes bytes is
// refused (KindTooLarge) as soon as that shows, a body that is not a batch
// is refused (KindInvalid); either way nothing of it is stored. With every
// slot taken for ingestSlotWait the batch is refused unread (KindBusy).
// size is the body's declared length (-1: unknown); a larger one than the
// bound is refused before anything is read.
func (g *runIngest) batch(ctx context.Context, node *store.Node, body io.Reader, size int64) (protocol.RunsResponse, error) {
	if size > protocol.MaxRunsBatchBytes {
		return protocol.RunsResponse{}, Errorf(KindTooLarge, "a batch holds at most %d runs and %d bytes (this one has %d bytes); send fewer runs at a time",
			protocol.MaxRunsPerBatch, protocol.MaxRunsBatchBytes, size)
	}
	release, err := g.group.acquire(ctx)
	if err != nil {
		return protocol.RunsResponse{}, err
	}
	defer release()
	runs, err := protocol.DecodeRunsRequest(body)
	switch {
	case errors.Is(err, protocol.ErrBatchTooLarge):
		return protocol.RunsResponse{}, wrapf(KindTooLarge, err, "a batch holds at most %d runs and %d bytes (%s); send fewer runs at a time",
			protocol.MaxRunsPerBatch, protocol.MaxRunsBatchBytes, err.Error())
	case err != nil:
		return protocol.RunsResponse{}, wrapf(KindInvalid, err, "invalid JSON body: %s", err.Error())
	}
	return g.reports(ctx, node, runs)
}

// acquire takes an ingest slot, waiting at most ingestSlotWait.
func (g *ingestGroup) acquire(ctx context.Context) (func(), error) {
	release, err := g.slots.acquire(ctx, IngestSlots, ingestSlotWait)
	if errors.Is(err, errNoSlot) {
		return nil, Errorf(KindBusy, "the master is reading %d batches of run reports already; deliver this one again in %s",
			IngestSlots, IngestRetryAfter)
	}
	return release, err
}

// slots is a counting semaphore made on first use.
type slots struct {
	once sync.Once
	ch   chan struct{}
}

// errNoSlot: every slot stayed taken for the whole wait.
var errNoSlot = errors.New("master: no free slot")

// acquire takes one of n slots, waiting at most wait (0: until ctx ends),
// and returns its release.
func (s *slots) acquire(ctx context.Context, n int, wait time.Duration) (func(), error) {
	s.once.Do(func() { s.ch = make(chan struct{}, n) })
	release := func() { <-s.ch }
	select {
	case s.ch <- struct{}{}:
		return release, nil
	default:
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case s.ch <- struct{}{}:
		return release, nil
	case <-timeout:
		return nil, errNoSlot
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Bounds of a run report's fields, so that nothing a worker sends can make
// the insert fail (column sizes, DATETIME range, INT columns).
const (
	maxTaskIDLen  = 36 // tasks.id
	maxRunIDLen   = 64 // runs.id
	maxHTTPStatus = 999
)

// oldestRunTime is the earliest time a run may carry: older times are a
// broken clock, and MySQL's DATETIME cannot hold year 1.
var oldestRunTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// reports stores a batch of run reports from node, validating each run on
// its own: a run that is malformed, names another node, names a task that
// does not exist or that node neither executes nor was sent to run, or
// carries times more than worker.MaxClockSkew in the future is listed in
// Rejected and not stored; the good ones are stored. Output is sanitized
// (NUL and invalid UTF-8 become U+FFFD, BinaryOutput set). Reports already
// stored (same run id) are skipped, so a redelivered batch is counted once.
// A new successful run triggers the task's children, a new failed one the
// failure notifications, after the commit. Only a database failure fails the
// whole batch (its worker delivers it again). A batch costs one query for its
// checks, then is stored together with the batches other workers deliver at
// the same time (see storeRuns).
func (g *runIngest) reports(ctx context.Context, node *store.Node, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	if len(runs) > MaxRunsPerBatch {
		return protocol.RunsResponse{}, Errorf(KindInvalid, "at most %d runs per batch", MaxRunsPerBatch)
	}
	now := time.Now()
	resp := protocol.RunsResponse{Rejected: []protocol.RunRejected{}}
	reject := func(id string, err error) {
		resp.Rejected = append(resp.Rejected, protocol.RunRejected{ID: id, Error: Message(err)})
		g.log.Warn("run report rejected", "node", node.Name, "run", id, "err", err)
	}
	rows := make([]store.Run, 0, len(runs))
	for i := range runs {
		row, err := checkRun(&runs[i], node.Name, now)
		if err != nil {
			reject(runs[i].ID, err)
			continue
		}
		rows = append(rows, row)
	}
	// Runs of delayed tasks' sendings go their own way (delayed_runs.go).
	rows, delayed := splitDelayedRuns(rows)
	// A delayed task's sending is shown by its task, not live: its start
	// notices are taken and dropped.
	notices := len(delayed)
	delayed = slices.DeleteFunc(delayed, func(d delayedRun) bool { return !protocol.Result(d.run.Result).Ended() })
	notices -= len(delayed)
	dAccepted, dDups, err := g.delayed.ingestDelayedRuns(ctx, node, delayed, reject)
	dAccepted += notices
	if err != nil {
		return protocol.RunsResponse{}, err
	}
	taskIDs := make([]string, 0, len(rows))
	for _, r := range rows {
		taskIDs = append(taskIDs, r.TaskID)
	}
	// One query for the whole batch: which tasks exist, which this node may
	// report, and their children (started after the commit).
	var targets map[string]store.ReportTarget
	if len(rows) > 0 {
		var err error
		targets, err = store.ReportTargets(ctx, g.db, node.Name, dedupe(taskIDs))
		if err != nil {
			return protocol.RunsResponse{}, fmt.Errorf("master: check reported tasks: %w", err)
		}
		ok := rows[:0]
		for _, r := range rows {
			t, exists := targets[r.TaskID]
			switch {
			case !exists:
				reject(r.ID, Errorf(KindForbidden, "run %s: task %s does not exist", r.ID, r.TaskID))
			case !t.Allowed:
				reject(r.ID, Errorf(KindForbidden, "run %s: node %s does not execute task %s", r.ID, node.Name, r.TaskID))
			default:
				ok = append(ok, r)
			}
		}
		rows = ok
	}
	if err := g.scrubRuns(ctx, rows); err != nil {
		return protocol.RunsResponse{}, err
	}
	fresh, err := g.storeRuns(ctx, rows)
	if err != nil {
		return protocol.RunsResponse{}, err
	}
	resp.Accepted, resp.Duplicates = len(fresh)+dAccepted, len(rows)-len(fresh)+dDups
	g.metrics.runsIngested(fresh)
	var steps []store.Run
	for _, r := range fresh {
		res := protocol.Result(r.Result)
		if r.Covers > 0 && r.Attempt == 1 && !r.Manual {
			// A catch-up run a worker made for missed fires (after its
			// restart, or when a master answers again): the event log says
			// what it stands for. The master's own catch-ups (sent as runs
			// now, manual) have their event already.
			g.events.record(WithActor(ctx, ActorScheduler), "task.misfire", store.TargetTask, r.TaskID, nil,
				fmt.Sprintf("catch-up run %s on %s for %d missed fires from %s", r.ID, r.Node, r.Covers,
					r.ScheduledAt.UTC().Format(time.RFC3339)))
		}
		if r.WorkflowRun != "" {
			// Its task's children are not run: the workflow says what
			// follows.
			steps = append(steps, r)
		}
		if !res.Ended() {
			continue // a start notice: the run's end is acted upon
		}
		if !res.Succeeded() {
			g.notify.runFailed(r)
		} else if children := targets[r.TaskID].Children; len(children) > 0 && r.WorkflowRun == "" {
			g.runChildren(r.TaskID, children)
		}
	}
	if len(steps) > 0 && g.stepsReported != nil {
		// Workflow steps' runs move their workflow runs on in the
		// background: the worker's answer does not wait for it.
		g.life.goBackground(func(ctx context.Context) { g.stepsReported(WithActor(ctx, ActorScheduler), steps) })
	}
	return resp, nil
}

// Group commit of run reports: concurrent batches (one per worker's
// delivery) are stored together, up to ingestRoundRows runs per transaction,
// by at most ingestWriters transactions at a time. One transaction for ten
// batches pays one commit (one fsync on MySQL, one WAL append on SQLite) and
// one counter UPDATE whose task rows it locks once, where ten transactions
// over the same tasks would queue on each other's row locks.
const (
	ingestRoundRows = 5000
	ingestRoundWait = 2 * time.Minute // bound of one round's transaction
)

// ingestWriters is how many ingest transactions run at once: SQLite has one
// writer (more would only wait in its busy handler, which sleeps in steps of
// up to 100 ms); MySQL overlaps one's commit with the next one's statements.
func ingestWriters(d store.Dialect) int {
	if d == store.SQLite {
		return 1
	}
	return 2
}

// ingestGroup is the queue of batches waiting to be stored. A batch's own
// request goroutine stores it: it waits until its batch was taken by a
// round, or a writer slot is free, then runs rounds from the queue's head
// until its own batch is stored. No goroutine outlives the requests.
type ingestGroup struct {
	// slots bound the batches read and stored at once (IngestBatch).
	slots slots

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*ingestJob
	writers int
}

// ingestJob is one batch in the queue.
type ingestJob struct {
	rows  []store.Run
	taken bool          // a round holds it
	done  chan struct{} // closed when fresh and err are set
	fresh []store.Run
	err   error
}

// storeRuns stores checked runs, with the batches that other requests are
// storing at the same time, and returns the new ones of rows.
func (g *runIngest) storeRuns(ctx context.Context, rows []store.Run) ([]store.Run, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	q := g.group
	job := &ingestJob{rows: rows, done: make(chan struct{})}
	q.mu.Lock()
	if q.cond == nil {
		q.cond = sync.NewCond(&q.mu)
	}
	q.queue = append(q.queue, job)
	for !job.taken && q.writers >= ingestWriters(g.dialect) {
		q.cond.Wait()
	}
	if !job.taken {
		q.writers++
		for !job.taken {
			var round []*ingestJob
			n := 0
			for len(q.queue) > 0 && (len(round) == 0 || n+len(q.queue[0].rows) <= ingestRoundRows) {
				j := q.queue[0]
				q.queue = q.queue[1:]
				j.taken = true
				round = append(round, j)
				n += len(j.rows)
			}
			q.cond.Broadcast() // the jobs taken stop waiting for a slot
			q.mu.Unlock()
			g.storeRound(ctx, round)
			q.mu.Lock()
		}
		q.writers--
		q.cond.Broadcast() // a slot is free
	}
	q.mu.Unlock()
	select {
	case <-job.done:
		return job.fresh, job.err
	case <-ctx.Done():
		// Stored or not, the worker delivers it again: it counts once.
		return nil, ctx.Err()
	}
}

// storeRound stores the batches of one round in one transaction and gives
// each its new runs: a run id given by several batches is new for the first.
// The transaction runs to its end whatever becomes of the requests that wait
// for it (a worker that gave up delivers again and finds its runs stored);
// the master's Stop ends it.
func (g *runIngest) storeRound(ctx context.Context, round []*ingestJob) {
	defer func() {
		for _, j := range round {
			close(j.done)
		}
	}()
	var rows []store.Run
	for _, j := range round {
		rows = append(rows, j.rows...)
	}
	ctx, cancel := g.life.detached(ctx, ingestRoundWait)
	defer cancel()
	fresh, err := store.StoreRuns(ctx, g.db, rows)
	if err != nil {
		for _, j := range round {
			j.err = fmt.Errorf("master: store runs: %w", err)
		}
		return
	}
	isNew := make(map[string]bool, len(fresh))
	for _, r := range fresh {
		isNew[r.ID] = true
	}
	for _, j := range round {
		for _, r := range j.rows {
			if isNew[r.ID] {
				j.fresh = append(j.fresh, r)
				delete(isNew, r.ID)
			}
		}
	}
}

// checkRun validates one report sent by node and builds its row: every
// string is bounded and clean, every number fits its column and every time
// lies between oldestRunTime and now + worker.MaxClockSkew.
func checkRun(r *protocol.RunReport, node string, now time.Time) (store.Run, error) {
	bad := func(format string, args ...any) (store.Run, error) {
		return store.Run{}, Errorf(KindInvalid, "run %s: "+format, append([]any{printable(r.ID)}, args...)...)
	}
	if !isRunID(r.ID, maxRunIDLen) {
		return store.Run{}, Errorf(KindInvalid, "run id must be 1-%d letters, digits, '.', '_', ':' or '-'", maxRunIDLen)
	}
	if !isRunID(r.TaskID, maxTaskIDLen) {
		return bad("task id must be 1-%d letters, digits, '.', '_', ':' or '-'", maxTaskIDLen)
	}
	if r.Node != node {
		return store.Run{}, Errorf(KindForbidden, "run %s names node %q, but was sent by %q", r.ID, printable(r.Node), node)
	}
	// Output too long is cut to its tail, not refused: an older worker's JSON
	// encoder turns each odd byte into a 3-byte U+FFFD, and a run must not be
	// lost for its output's size (the batch body limit bounds it already).
	out, binary := protocol.SanitizeOutput(r.Output)
	out = tailOutput(out, protocol.MaxOutputBytes)
	rep := *r
	rep.Output = out
	if err := rep.Validate(); err != nil {
		return store.Run{}, Errorf(KindInvalid, "%v", err)
	}
	latest := now.Add(protocol.MaxClockSkew)
	ended := r.EndedAt
	if !r.Result.Ended() {
		// In progress: stored with its start as its end until its final
		// report replaces it.
		ended = r.StartedAt
		if r.DurationMS != 0 || r.Output != "" || r.HTTPStatus != 0 || r.ExitCode != nil {
			return bad("a run in progress has no duration, output, status or exit code yet")
		}
	}
	scheduled := r.ScheduledAt
	if scheduled.IsZero() {
		scheduled = r.StartedAt
	}
	for _, t := range []struct {
		name string
		at   time.Time
	}{{"scheduled_at", scheduled}, {"started_at", r.StartedAt}, {"ended_at", ended}} {
		if t.at.Before(oldestRunTime) {
			return bad("%s %s is before %d", t.name, t.at.UTC().Format(time.RFC3339), oldestRunTime.Year())
		}
		if t.at.After(latest) {
			return bad("%s %s is more than %s in the future", t.name, t.at.UTC().Format(time.RFC3339), protocol.MaxClockSkew)
		}
	}
	if r.DurationMS < 0 {
		return bad("negative duration_ms %d", r.DurationMS)
	}
	if r.HTTPStatus < 0 || r.HTTPStatus > maxHTTPStatus {
		return bad("http_status %d out of range", r.HTTPStatus)
	}
	if r.ExitCode != nil && (*r.ExitCode < math.MinInt32 || *r.ExitCode > math.MaxInt32) {
		return bad("exit_code %d out of range", *r.ExitCode)
	}
	var exit *int
	if r.ExitCode != nil {
		exit = ptr(*r.ExitCode)
	}
	return store.Run{
		ID: r.ID, TaskID: r.TaskID, Node: node, ScheduledAt: scheduled.UTC(), StartedAt: r.StartedAt.UTC(),
		EndedAt: ended.UTC(), DurationMS: r.DurationMS, Result: string(r.Result), Attempt: r.Attempt,
		HTTPStatus: r.HTTPStatus, ExitCode: exit, Output: out, Manual: r.Manual, BinaryOutput: binary || r.BinaryOutput,
		Covers: r.Covers, TaskVersion: r.TaskVersion, WorkflowRun: r.WorkflowRun, WorkflowStep: r.WorkflowStep,
	}, nil
}

// isRunID reports whether s is a plain identifier of at most max bytes.
func isRunID(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// printable bounds and cleans a value a worker sent, for messages and logs.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	s, _ = protocol.SanitizeOutput(s)
	return s
}

// runChildren runs once each child of a task, in the background: a few at a
// time, under the master's context, so Stop cancels and waits for them.
func (g *runIngest) runChildren(taskID string, children []string) {
	g.life.goBackground(func(ctx context.Context) {
		ctx = WithActor(ctx, "task "+taskID)
		sem := make(chan struct{}, 4)
		var wg sync.WaitGroup
		for _, c := range children {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if _, node, err := g.runTask(ctx, c); err != nil {
					g.log.Warn("child task not started", "parent", taskID, "child", c, "err", err)
				} else {
					g.log.Info("child task started", "parent", taskID, "child", c, "node", node)
				}
			}()
		}
		wg.Wait()
	})
}

// List returns a page of a task's runs, newest first. A deleted task's
// runs stay readable; a task that never existed is not found.
func (rs *Runs) List(ctx context.Context, taskID string, limit, offset int) ([]store.Run, int, error) {
	// Runs of a deleted task stay readable by who may read its project.
	pid, err := store.TaskProject(ctx, rs.m.st.DB, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, taskNotFound(taskID)
	}
	if err != nil {
		return nil, 0, err
	}
	if err := authorize(ctx, pid, ActRead, taskNotFound(taskID)); err != nil {
		return nil, 0, err
	}
	release, err := rs.m.runLists.acquire(ctx, RunListSlots, 0)
	if err != nil {
		return nil, 0, err
	}
	runs, total, err := store.ListRuns(ctx, rs.m.st.DB, taskID, limit, offset)
	release()
	if err != nil {
		return nil, 0, err
	}
	return runs, total, nil
}

// Get returns one run.
func (rs *Runs) Get(ctx context.Context, id string) (*store.Run, error) {
	return rs.runFor(ctx, id, ActRead)
}

// runFor returns run id if whoever asks may do a to it: a run belongs to
// the project of its task or delayed task (a run whose task is gone
// entirely, to no project: only cluster admins and viewers of every
// project see it).
func (rs *Runs) runFor(ctx context.Context, id string, a Action) (*store.Run, error) {
	notFound := Errorf(KindNotFound, "run %s does not exist", id)
	r, err := store.GetRun(ctx, rs.m.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if PrincipalFrom(ctx) == nil {
		return r, nil
	}
	if err := authorize(ctx, rs.Project(ctx, r), a, notFound); err != nil {
		return nil, err
	}
	return r, nil
}

// Project returns the id of the project a run belongs to (its task's or
// its delayed task's), 0 when neither exists any more.
func (rs *Runs) Project(ctx context.Context, r *store.Run) int64 {
	if r.DelayedID != "" {
		if d, err := store.GetDelayed(ctx, rs.m.st.DB, r.DelayedID); err == nil {
			return d.ProjectID
		}
	} else if pid, err := store.TaskProject(ctx, rs.m.st.DB, r.TaskID); err == nil {
		return pid
	}
	return 0
}
