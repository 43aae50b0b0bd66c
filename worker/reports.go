package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Report delivery limits.
const (
	reportQueueSize = 10_000
	reportBatchSize = 500
	reportLinger    = 100 * time.Millisecond
)

// reporter delivers run reports to the master in batches. Every report is
// appended to a journal file in the data dir (runs.spool) when it is made, and
// kept in a bounded in-memory queue for fast delivery. The journal is emptied
// once everything in it is delivered; while the master is unreachable it keeps
// what the queue cannot hold, and after a crash or restart it is delivered
// first. The master stores each run id once, so a report sent twice is
// counted once.
type reporter struct {
	log  *slog.Logger
	post func(ctx context.Context, runs []RunReport) error
	path string

	mu      sync.Mutex
	file    *os.File
	pending []RunReport // undelivered, oldest first; a bounded prefix of the journal
	spilled bool        // the journal holds undelivered reports that pending does not

	kick chan struct{}
	done chan struct{}
}

func newReporter(dataDir string, log *slog.Logger, post func(context.Context, []RunReport) error) *reporter {
	r := &reporter{log: log, post: post, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if dataDir == "" {
		return r
	}
	r.path = filepath.Join(dataDir, "runs.spool")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		log.Error("report journal unavailable: reports are kept in memory only", "err", err)
		return r
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		log.Error("report journal unavailable: reports are kept in memory only", "err", err)
		return r
	}
	r.file = f
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		r.spilled = true // left by an earlier process: deliver it first
		log.Info("undelivered run reports found; delivering them", "journal", r.path, "bytes", st.Size())
	}
	return r
}

// add records a report: in the journal first, then in the queue.
func (r *reporter) add(rep RunReport) {
	line, err := json.Marshal(&rep)
	r.mu.Lock()
	if err == nil && r.file != nil {
		_, err = r.file.Write(append(line, '\n'))
	}
	if err != nil {
		r.log.Error("run report not journaled; kept in memory only", "run", rep.ID, "err", err)
	}
	if len(r.pending) < reportQueueSize {
		r.pending = append(r.pending, rep)
	} else if r.file != nil && err == nil {
		r.spilled = true
	} else {
		r.log.Error("run report lost: queue full and no journal", "run", rep.ID)
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run delivers until ctx ends, then tries one last quick delivery; whatever is
// left stays in the journal for the next start.
func (r *reporter) run(ctx context.Context) {
	defer close(r.done)
	backoff := time.Second
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if !r.drain(fctx) {
				r.log.Info("run reports kept in the journal for delivery after restart", "journal", r.path)
			}
			cancel()
			r.mu.Lock()
			if r.file != nil {
				_ = r.file.Sync()
				_ = r.file.Close()
				r.file = nil
			}
			r.mu.Unlock()
			return
		case <-r.kick:
			// Let a burst gather into one batch.
			select {
			case <-time.After(reportLinger):
			case <-ctx.Done():
			}
		case <-retry.C:
		}
		if r.drain(ctx) {
			backoff = time.Second
			retry.Reset(time.Hour)
		} else {
			retry.Reset(backoff)
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

// drain delivers everything undelivered; false means the master refused or
// could not be reached.
func (r *reporter) drain(ctx context.Context) bool {
	for {
		r.mu.Lock()
		spilled := r.spilled
		r.mu.Unlock()
		if spilled {
			if !r.deliverJournal(ctx) {
				return false
			}
			continue
		}
		r.mu.Lock()
		n := min(len(r.pending), reportBatchSize)
		batch := append([]RunReport(nil), r.pending[:n]...)
		r.mu.Unlock()
		if n == 0 {
			return true
		}
		if r.deliver(ctx, batch) != nil {
			return false
		}
		r.mu.Lock()
		// Only drain removes from the front; add only appends: the first n are the batch.
		r.pending = r.pending[n:]
		if len(r.pending) == 0 && !r.spilled {
			r.truncateLocked()
		}
		r.mu.Unlock()
	}
}

func (r *reporter) deliver(ctx context.Context, runs []RunReport) error {
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := r.post(dctx, runs)
	if err != nil {
		r.log.Warn("run reports not delivered; keeping them", "runs", len(runs), "err", err)
	}
	return err
}

// deliverJournal delivers every report in the journal, then keeps only what
// was appended meanwhile.
func (r *reporter) deliverJournal(ctx context.Context) bool {
	r.mu.Lock()
	data, err := os.ReadFile(r.path)
	r.mu.Unlock()
	if err != nil {
		r.log.Error("read report journal", "err", err)
		return false
	}
	runs := parseJournal(data, r.log)
	for sent := 0; sent < len(runs); {
		end := min(sent+reportBatchSize, len(runs))
		if r.deliver(ctx, runs[sent:end]) != nil {
			return false
		}
		sent = end
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	all, err := os.ReadFile(r.path)
	if err != nil || len(all) < len(data) {
		r.log.Error("read report journal", "err", err)
		return false
	}
	rest := all[len(data):]
	r.truncateLocked()
	if len(rest) > 0 && r.file != nil {
		if _, err := r.file.Write(rest); err != nil {
			r.log.Error("rewrite report journal", "err", err)
		}
	}
	left := parseJournal(rest, r.log)
	r.spilled = len(left) > reportQueueSize
	if len(left) > reportQueueSize {
		left = left[:reportQueueSize]
	}
	r.pending = left
	if len(runs) > 0 {
		r.log.Info("delivered journaled run reports", "runs", len(runs))
	}
	return true
}

func (r *reporter) truncateLocked() {
	if r.file == nil {
		return
	}
	if err := r.file.Truncate(0); err != nil {
		r.log.Error("empty report journal", "err", err)
	}
}

func parseJournal(data []byte, log *slog.Logger) []RunReport {
	var runs []RunReport
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 256<<10), 4<<20)
	for sc.Scan() {
		var rep RunReport
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			log.Error("skipping a corrupt line in the report journal", "err", err)
			continue
		}
		if !seen[rep.ID] {
			seen[rep.ID] = true
			runs = append(runs, rep)
		}
	}
	return runs
}
