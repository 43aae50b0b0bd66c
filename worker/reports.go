package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Report delivery limits.
const (
	reportQueueSize  = 10_000
	reportQueueBytes = 16 << 20 // in-memory copies; past it reports wait in the journal only
	reportBatchSize  = 500
	// reportBatchBytes bounds the JSON of one batch: the master refuses
	// batches over protocol.MaxRunsBatchBytes; the rest is room for the
	// envelope and the commas.
	reportBatchBytes = protocol.MaxRunsBatchBytes - 4<<10
	// maxRetryAfter bounds how long a master's Retry-After holds delivery.
	maxRetryAfter = time.Minute
	reportLinger  = 100 * time.Millisecond
	// DefaultJournalMaxBytes bounds the run journal (runs.spool) when
	// Config.JournalMaxBytes is not set: about 256 MiB, some 100,000 runs with
	// large outputs or millions with small ones. Past it new reports are
	// dropped, logged and counted; the journaled (older) ones are kept.
	DefaultJournalMaxBytes = 256 << 20
	// maxJournalLine is the longest journal line read back; a longer one is
	// corrupt (a report is at most MaxOutputBytes of output plus a little).
	maxJournalLine = 4 << 20
	// journalFileName is the run journal's name in the data dir.
	journalFileName = "runs.spool"
)

// ReportStats counts run reports the worker gave up on.
type ReportStats struct {
	// Dropped counts reports the master refused (listed as rejected, or a
	// report it could not read at all): they are never sent again.
	Dropped int64
	// Overflow counts reports not kept because the journal reached its size
	// bound (or, without a journal, the in-memory queue was full).
	Overflow int64
	// JournalBytes is the journal's current size.
	JournalBytes int64
	// Pending counts the reports waiting in memory for delivery.
	Pending int
	// UnsentBytes is the part of the journal not yet delivered.
	UnsentBytes int64
	// Lost counts reports held only in memory (the journal could not take
	// them) that were not delivered before the worker stopped.
	Lost int64
}

// queued is a report waiting in memory; off and size place its line in the
// journal (off < 0: not journaled).
type queued struct {
	rep  protocol.RunReport
	seq  uint64
	off  int64
	size int64
	mem  int64
	// notice: a start notice, memory only by design (see notice).
	notice bool
}

// reporter delivers run reports to the master in batches. Every report is
// appended to a journal file in the data dir (runs.spool) when it is made;
// the journal is emptied once everything in it is delivered, and after a crash
// or restart its content is delivered first. Records are framed (see
// frameRecord): a torn tail is cut off at start, and a write that fails
// (a full disk) is cut off at once, so the next record is never glued to a
// fragment. Reports also wait in a bounded
// in-memory queue for fast delivery while the queue mirrors the journal's
// undelivered tail; when it cannot ("spilled"), delivery streams the journal
// from disk. The mutex guards only the state and the short appends of add:
// delivery reads the journal and talks to the master without it. The master
// stores each run id once, so a report sent twice is counted once.
type reporter struct {
	log      *slog.Logger
	post     func(ctx context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error)
	path     string
	maxBytes int64

	// health is told of every failed and successful journal write: the
	// worker's degraded state (shared with the fires file).
	health *dataDirHealth

	mu   sync.Mutex
	file journalFile // append handle; nil: memory only
	// openFailed: the journal could not be opened at start; add tries again.
	openFailed bool
	// broken: a failed write may have left a fragment past size that could
	// not be cut off yet; the next append cuts it first or is not made.
	broken       bool
	size         int64    // journal length: the end of its last whole record
	sent         int64    // journal prefix delivered (or given up on)
	pending      []queued // oldest first
	pendingBytes int64
	nextSeq      uint64
	// spilled: the journal holds undelivered reports before the ones pending
	// mirrors; pending then mirrors only [tailFrom, size).
	spilled  bool
	tailFrom int64

	dropped  atomic.Int64
	overflow atomic.Int64
	lost     atomic.Int64

	// metrics are the worker's Prometheus metrics (see metrics.go).
	metrics *metrics

	kick chan struct{}
	// hurry cuts the wait for a batch short: a workflow step ended, and
	// its workflow's next steps wait for this report.
	hurry chan struct{}
	done  chan struct{}

	// retryAfter is the wait a busy master asked for (Retry-After) in the
	// last failed delivery; only the delivery goroutine uses it.
	retryAfter time.Duration
}

func newReporter(dataDir string, maxBytes int64, log *slog.Logger, post func(context.Context, []protocol.RunReport) (protocol.RunsResponse, error)) *reporter {
	if maxBytes <= 0 {
		maxBytes = DefaultJournalMaxBytes
	}
	r := &reporter{log: log, post: post, maxBytes: maxBytes, kick: make(chan struct{}, 1), hurry: make(chan struct{}, 1), done: make(chan struct{}),
		health: newDataDirHealth(log)}
	r.metrics = newMetrics(r.stats)
	if dataDir == "" {
		return r
	}
	r.path = filepath.Join(dataDir, journalFileName)
	r.mu.Lock()
	r.openLocked()
	r.mu.Unlock()
	return r
}

// openLocked opens the journal, cuts a torn tail off it and, when it holds
// reports of an earlier process, has them delivered first. On failure the
// reports are kept in memory only, the worker is degraded, and add tries
// again.
func (r *reporter) openLocked() {
	fail := func(err error) {
		r.openFailed = true
		r.health.failed(journalFileName, err, "run reports are kept in memory only")
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		fail(err)
		return
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		fail(err)
		return
	}
	// An older file may have a looser mode; run output can hold secrets.
	if err := f.Chmod(0o600); err != nil {
		r.log.Warn("cannot make the report journal private", "journal", r.path, "err", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		fail(err)
		return
	}
	size := st.Size()
	good, records, err := scanJournal(f, size)
	if err != nil {
		f.Close()
		fail(err)
		return
	}
	r.file, r.size, r.openFailed = f, good, false
	if good < size {
		// A write cut short (a crash, a full disk) left a torn record:
		// cut it off, so the next record does not join it.
		r.log.Warn("cut a torn record off the end of the report journal", "journal", r.path, "bytes", size-good)
		if err := f.Truncate(good); err != nil {
			r.broken = true // appends wait until it can be cut
			r.health.failed(journalFileName, err, "run reports are kept in memory only")
		}
	}
	if r.size > 0 {
		r.spilled, r.tailFrom = true, r.size // left by an earlier process: deliver it first
		r.log.Info("undelivered run reports found; delivering them", "journal", r.path, "bytes", r.size, "records", records)
	}
}

// appendLocked appends one record to the journal. A failed or short write is
// cut off at once; when even that fails the journal is marked broken and the
// next append cuts first. Either way the next record starts at size, never
// after a fragment.
func (r *reporter) appendLocked(rec []byte) error {
	if r.broken {
		if err := r.file.Truncate(r.size); err != nil {
			return fmt.Errorf("cut a torn record off the journal: %w", err)
		}
		r.broken = false
	}
	if _, err := r.file.Write(rec); err != nil {
		// Part of it may be on disk, and O_APPEND writes at the real end.
		if terr := r.file.Truncate(r.size); terr != nil {
			r.broken = true
		}
		return err
	}
	r.size += int64(len(rec))
	return nil
}

// stats returns the reporter's counters.
func (r *reporter) stats() ReportStats {
	r.mu.Lock()
	size, unsent, pending := r.size, r.size-r.sent, len(r.pending)
	r.mu.Unlock()
	return ReportStats{Dropped: r.dropped.Load(), Overflow: r.overflow.Load(), JournalBytes: size,
		Pending: pending, UnsentBytes: unsent, Lost: r.lost.Load()}
}

// add records a report: in the journal first, then in the queue. A report
// that would grow the journal past its bound is dropped, so the older ones
// are kept.
func (r *reporter) add(rep protocol.RunReport) {
	if !rep.EndedAt.IsZero() { // a finished run, not news of one in progress
		r.metrics.ran(string(rep.Result), time.Duration(rep.DurationMS)*time.Millisecond)
	}
	line, err := marshalReport(&rep)
	if err != nil {
		r.dropped.Add(1)
		r.log.Error("run report dropped: cannot encode it", "run", rep.ID, "err", err)
		return
	}
	line = frameRecord(line)
	r.mu.Lock()
	q := queued{rep: rep, off: -1, mem: int64(len(line))}
	if r.file == nil && r.openFailed {
		r.openLocked()
	}
	if r.file != nil {
		if r.size+int64(len(line)) > r.maxBytes {
			size := r.size
			r.mu.Unlock()
			r.overflow.Add(1)
			r.log.Error("run report dropped: the run journal is full (the master has not taken reports for a long time)",
				"run", rep.ID, "task", rep.TaskID, "journal", r.path, "bytes", size, "bound", r.maxBytes)
			return
		}
		off := r.size
		if err := r.appendLocked(line); err != nil {
			// Logged once per change by health, not once per run.
			r.health.failed(journalFileName, err, "run reports are kept in memory only")
			r.log.Debug("run report not journaled; kept in memory only", "run", rep.ID, "err", err)
		} else {
			r.health.ok(journalFileName)
			q.off, q.size = off, int64(len(line))
		}
	}
	r.nextSeq++
	q.seq = r.nextSeq
	fits := len(r.pending) < reportQueueSize && r.pendingBytes+q.mem <= reportQueueBytes
	switch {
	case fits:
		r.pending = append(r.pending, q)
		r.pendingBytes += q.mem
	case q.off >= 0:
		// The queue no longer mirrors the journal's tail: deliver from disk,
		// keeping in memory only what the journal does not hold.
		r.spilled, r.tailFrom = true, r.size
		r.keepUnjournaledLocked(r.size)
	default:
		r.overflow.Add(1)
		r.log.Error("run report lost: the queue is full and there is no journal", "run", rep.ID, "task", rep.TaskID)
	}
	r.mu.Unlock()
	if rep.WorkflowRun != "" {
		select {
		case r.hurry <- struct{}{}:
		default:
		}
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// notice queues a start notice (a run in progress) in memory only: after a
// crash it would tell of a run that no longer exists, while the master marks
// the runs of a worker that restarted or went offline as lost by itself. A
// full queue drops it: the run's final report still comes.
func (r *reporter) notice(rep protocol.RunReport) {
	line, err := marshalReport(&rep)
	if err != nil {
		r.log.Warn("start notice dropped: cannot encode it", "run", rep.ID, "err", err)
		return
	}
	q := queued{rep: rep, off: -1, mem: int64(len(line)) + 1, notice: true}
	r.mu.Lock()
	if len(r.pending) >= reportQueueSize || r.pendingBytes+q.mem > reportQueueBytes {
		r.mu.Unlock()
		r.log.Debug("start notice dropped: the report queue is full", "run", rep.ID)
		return
	}
	r.nextSeq++
	q.seq = r.nextSeq
	r.pending = append(r.pending, q)
	r.pendingBytes += q.mem
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// keepUnjournaledLocked removes from pending the reports whose journal lines
// start before end (the journal delivers them).
func (r *reporter) keepUnjournaledLocked(end int64) {
	kept := r.pending[:0]
	var bytes int64
	for _, q := range r.pending {
		if q.off < 0 || q.off >= end {
			kept = append(kept, q)
			bytes += q.mem
		}
	}
	clear(r.pending[len(kept):])
	r.pending, r.pendingBytes = kept, bytes
}

// run delivers until ctx ends, then tries one last quick delivery; whatever is
// left stays in the journal for the next start.
func (r *reporter) run(ctx context.Context) {
	defer close(r.done)
	backoff := time.Second
	var notBefore time.Time // set while a busy master's Retry-After runs
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if !r.drain(fctx) {
				r.keepAtStop()
			}
			cancel()
			r.close()
			return
		case <-r.kick:
			if time.Now().Before(notBefore) {
				continue // a busy master asked for time: the retry timer comes back
			}
			// Let a burst gather into one batch, unless a workflow step
			// ended: its next steps wait for it.
			select {
			case <-r.hurry:
			default:
				select {
				case <-time.After(reportLinger):
				case <-r.hurry:
				case <-ctx.Done():
				}
			}
		case <-retry.C:
		}
		r.retryAfter = 0
		if r.drain(ctx) {
			backoff, notBefore = time.Second, time.Time{}
			retry.Reset(time.Hour)
		} else {
			// A busy master (429) says when to come back: not sooner, also
			// when new reports arrive meanwhile.
			wait := max(backoff, r.retryAfter)
			if r.retryAfter > 0 {
				notBefore = time.Now().Add(wait)
			}
			retry.Reset(wait)
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

// keepAtStop journals the undelivered reports held only in memory (a write
// that failed earlier may work now) and says what became of them: kept in
// the journal, or lost, with their count. Start notices are memory only by
// design and not counted.
func (r *reporter) keepAtStop() {
	r.mu.Lock()
	var journaled, lost int
	var lastErr error
	for i := range r.pending {
		q := &r.pending[i]
		if q.off >= 0 || q.notice {
			continue
		}
		if r.file == nil {
			lost++
			continue
		}
		line, err := marshalReport(&q.rep)
		if err == nil {
			rec := frameRecord(line)
			if r.size+int64(len(rec)) > r.maxBytes {
				err = errors.New("the run journal is at its size bound")
			} else if err = r.appendLocked(rec); err == nil {
				q.off, q.size = r.size-int64(len(rec)), int64(len(rec))
				journaled++
				continue
			}
		}
		lastErr = err
		lost++
	}
	unsent, path, hasFile := r.size-r.sent, r.path, r.file != nil
	r.mu.Unlock()
	if journaled > 0 {
		r.health.ok(journalFileName)
	}
	if lost > 0 {
		r.lost.Add(int64(lost))
		why := "there is no journal (no data dir)"
		switch {
		case lastErr != nil:
			why = lastErr.Error()
		case path != "":
			why = "the journal could not be opened"
		}
		r.log.Error("run reports lost: the master did not take them and the journal could not hold them",
			"lost", lost, "journaled_now", journaled, "journal", path, "why", why)
	}
	if hasFile && unsent > 0 {
		r.log.Info("run reports kept in the journal for delivery after restart", "journal", path, "bytes", unsent,
			"journaled_now", journaled)
	}
}

// close syncs and closes the journal; what it holds is delivered by the
// next process.
func (r *reporter) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file != nil {
		_ = r.file.Sync()
		_ = r.file.Close()
		r.file = nil
	}
}

// drain delivers everything undelivered; false means the master could not
// take a batch (unreachable, 5xx): it is kept and retried later.
func (r *reporter) drain(ctx context.Context) bool {
	for {
		r.mu.Lock()
		if r.spilled {
			r.mu.Unlock()
			if !r.deliverJournal(ctx) {
				return false
			}
			continue
		}
		n, size := 0, int64(0)
		for n < len(r.pending) && n < reportBatchSize && (n == 0 || size+r.pending[n].mem <= reportBatchBytes) {
			size += r.pending[n].mem
			n++
		}
		batch := make([]protocol.RunReport, n)
		for i := range n {
			batch[i] = r.pending[i].rep
		}
		var lastSeq uint64
		from, end := int64(-1), int64(-1) // journal span of the batch
		for _, q := range r.pending[:n] {
			lastSeq = q.seq
			if q.off >= 0 {
				if from < 0 {
					from = q.off
				}
				end = q.off + q.size
			}
		}
		r.mu.Unlock()
		if n == 0 {
			return true
		}
		if r.deliver(ctx, batch) != nil {
			return false
		}
		r.mu.Lock()
		i := 0
		for i < len(r.pending) && r.pending[i].seq <= lastSeq {
			r.pendingBytes -= r.pending[i].mem
			i++
		}
		clear(r.pending[:i])
		r.pending = r.pending[i:]
		// The batch's lines follow the delivered prefix unless add spilled
		// meanwhile and the journal was reread; advance only from there.
		if from >= 0 && from == r.sent {
			r.sent = end
		}
		r.truncateIfDeliveredLocked()
		r.mu.Unlock()
	}
}

// truncateIfDeliveredLocked empties the journal once all of it is delivered.
func (r *reporter) truncateIfDeliveredLocked() {
	if r.file == nil || r.spilled || r.sent < r.size {
		return
	}
	if err := r.file.Truncate(0); err != nil {
		r.log.Error("empty report journal", "journal", r.path, "err", err)
		return
	}
	r.size, r.sent, r.tailFrom = 0, 0, 0
	r.broken = false // a fragment past the end went with the rest
}

// deliverJournal streams the undelivered part of the journal to the master in
// batches, without holding the mutex. When the queue mirrors everything
// appended meanwhile, delivery goes back to the queue.
func (r *reporter) deliverJournal(ctx context.Context) bool {
	r.mu.Lock()
	from, end := r.sent, r.size
	r.mu.Unlock()
	if from < end {
		f, err := os.Open(r.path)
		if err != nil {
			r.log.Error("read report journal", "journal", r.path, "err", err)
			return false
		}
		ok := r.streamJournal(ctx, f, from, end)
		f.Close()
		if !ok {
			return false
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent < end {
		r.sent = end
	}
	if r.sent >= r.tailFrom {
		// What was appended after end is in the queue: leave the disk.
		r.keepUnjournaledLocked(end)
		r.spilled = false
		r.truncateIfDeliveredLocked()
		r.log.Info("delivered journaled run reports", "bytes", end-from)
	}
	return true
}

// streamJournal delivers the journal lines in [from, end) of f.
func (r *reporter) streamJournal(ctx context.Context, f *os.File, from, end int64) bool {
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, end-from), 64<<10)
	off := from
	batch := make([]protocol.RunReport, 0, reportBatchSize)
	var batchBytes int64
	seen := map[string]bool{}
	flush := func() bool {
		if len(batch) > 0 && r.deliver(ctx, batch) != nil {
			return false
		}
		r.mu.Lock()
		if r.sent < off {
			r.sent = off
		}
		r.mu.Unlock()
		batch = batch[:0]
		batchBytes = 0
		clear(seen)
		return true
	}
	for {
		line, n, tooLong, err := readJournalLine(br)
		off += n
		switch {
		case tooLong:
			r.log.Error("skipping an overlong line in the report journal", "journal", r.path, "bytes", n)
		case len(line) > 0 && string(line) != "\n":
			var rep protocol.RunReport
			payload, ok := recordPayload(line)
			var jerr error
			if !ok {
				jerr = errors.New("torn or corrupt record")
			} else {
				jerr = json.Unmarshal(payload, &rep)
			}
			if jerr != nil {
				r.log.Error("skipping a corrupt line in the report journal", "journal", r.path, "err", jerr)
			} else if !seen[rep.ID] {
				// A batch stays within the master's byte bound: the
				// line's JSON is the report's JSON in the batch.
				if len(batch) > 0 && batchBytes+int64(len(payload)) > reportBatchBytes {
					off -= n // this line is not delivered yet
					ok := flush()
					off += n
					if !ok {
						return false
					}
				}
				seen[rep.ID] = true
				batch = append(batch, rep)
				batchBytes += int64(len(payload))
			}
		}
		if len(batch) == reportBatchSize && !flush() {
			return false
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.log.Error("read report journal", "journal", r.path, "err", err)
				return false
			}
			return flush()
		}
	}
}

// readJournalLine reads one line (with its newline) of at most
// maxJournalLine bytes; a longer one is consumed and reported as tooLong.
func readJournalLine(br *bufio.Reader) (line []byte, n int64, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		n += int64(len(frag))
		if !tooLong {
			if len(line)+len(frag) > maxJournalLine {
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, n, tooLong, err
	}
}

// withoutVersions clears the task versions of runs and reports whether any
// was set.
func withoutVersions(runs []protocol.RunReport) bool {
	had := false
	for i := range runs {
		had = had || runs[i].TaskVersion != 0
		runs[i].TaskVersion = 0
	}
	return had
}

// deliver posts a batch. Runs the master refuses one by one (listed in its
// answer) are dropped with a log line each. A batch the master refuses as a
// whole as unreadable (400, 413) is split until the bad runs are alone, and
// those are dropped: one bad run never blocks the others. Any other failure
// (unreachable, 5xx, 401) keeps the batch for a later retry.
func (r *reporter) deliver(ctx context.Context, runs []protocol.RunReport) error {
	dctx, cancel := context.WithTimeout(ctx, protocol.RunsTimeout)
	resp, err := r.post(dctx, runs)
	cancel()
	switch {
	case err == nil:
		for _, rj := range resp.Rejected {
			r.dropped.Add(1)
			r.log.Error("run report refused by the master; dropped", "run", rj.ID, "reason", rj.Error)
		}
		return nil
	case errors.Is(err, errBatchRefused) && strings.Contains(err.Error(), `unknown field "task_version"`) && withoutVersions(runs):
		// A master of an earlier version, which keeps no task versions:
		// the same runs without them, rather than dropped.
		r.log.Info("the master takes no task versions (an earlier version): reporting the runs without them", "runs", len(runs))
		return r.deliver(ctx, runs)
	case errors.Is(err, errBatchRefused) && len(runs) == 1:
		r.dropped.Add(1)
		r.log.Error("run report refused by the master as unreadable; dropped", "run", runs[0].ID, "task", runs[0].TaskID, "err", err)
		return nil
	case errors.Is(err, errBatchRefused):
		r.log.Warn("the master refused a batch of run reports as a whole; splitting it to find the bad ones", "runs", len(runs), "err", err)
		half := len(runs) / 2
		if err := r.deliver(ctx, runs[:half]); err != nil {
			return err
		}
		return r.deliver(ctx, runs[half:])
	default:
		var se *protocol.StatusError
		if errors.As(err, &se) && se.RetryAfter > 0 {
			r.retryAfter = min(se.RetryAfter, maxRetryAfter)
		}
		r.log.Warn("run reports not delivered; keeping them", "runs", len(runs), "err", err)
		return err
	}
}
