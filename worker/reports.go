package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// reporter delivers run reports to the master in batches. Reports wait in a
// bounded in-memory queue; whatever cannot be delivered (master down, queue
// full) goes to an append-only spool file in the data dir, which is delivered
// first once the master answers again. The master stores each run id once, so
// a report sent twice (e.g. a crash between delivery and spool truncation) is
// counted once.
type reporter struct {
	log   *slog.Logger
	post  func(ctx context.Context, runs []RunReport) error
	queue chan RunReport
	spool string

	mu sync.Mutex // guards the spool file
	// kick wakes the loop when something was spooled.
	kick chan struct{}
	done chan struct{}
}

func newReporter(dataDir string, log *slog.Logger, post func(context.Context, []RunReport) error) *reporter {
	r := &reporter{log: log, post: post, queue: make(chan RunReport, reportQueueSize), kick: make(chan struct{}, 1), done: make(chan struct{})}
	if dataDir != "" {
		r.spool = filepath.Join(dataDir, "runs.spool")
	}
	return r
}

// add queues a report without blocking; a full queue spills to the spool.
func (r *reporter) add(rep RunReport) {
	select {
	case r.queue <- rep:
	default:
		if err := r.appendSpool([]RunReport{rep}); err != nil {
			r.log.Error("run report lost: queue full and spool failed", "run", rep.ID, "err", err)
		}
	}
}

// run delivers until ctx ends, then flushes the queue (delivering it or
// spooling it) and returns.
func (r *reporter) run(ctx context.Context) {
	defer close(r.done)
	backoff := time.Second
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		var batch []RunReport
		select {
		case <-ctx.Done():
			r.flush()
			return
		case rep := <-r.queue:
			batch = r.collect(ctx, rep)
		case <-retry.C:
		case <-r.kick:
		}
		// The spool holds older reports: deliver it first.
		spoolOK := r.deliverSpool(ctx)
		if len(batch) > 0 {
			if !spoolOK || r.deliver(ctx, batch) != nil {
				if err := r.appendSpool(batch); err != nil {
					r.log.Error("run reports lost: spool failed", "runs", len(batch), "err", err)
				}
				spoolOK = false
			}
		}
		if spoolOK {
			backoff = time.Second
			retry.Reset(time.Hour)
		} else {
			retry.Reset(backoff)
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

// collect gathers up to a batch, waiting briefly for more to arrive.
func (r *reporter) collect(ctx context.Context, first RunReport) []RunReport {
	batch := []RunReport{first}
	linger := time.NewTimer(reportLinger)
	defer linger.Stop()
	for len(batch) < reportBatchSize {
		select {
		case rep := <-r.queue:
			batch = append(batch, rep)
		case <-linger.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
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

// flush empties the queue at shutdown: one quick delivery try, else the spool.
func (r *reporter) flush() {
	var batch []RunReport
	for {
		select {
		case rep := <-r.queue:
			batch = append(batch, rep)
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if r.deliverSpool(ctx) && r.post(ctx, batch) == nil {
		return
	}
	if err := r.appendSpool(batch); err != nil {
		r.log.Error("run reports lost at shutdown: spool failed", "runs", len(batch), "err", err)
		return
	}
	r.log.Info("run reports spooled for delivery after restart", "runs", len(batch), "spool", r.spool)
}

func (r *reporter) appendSpool(runs []RunReport) error {
	if r.spool == "" {
		return fmt.Errorf("worker: no --data-dir for the report spool")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range runs {
		if err := enc.Encode(&runs[i]); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(r.spool), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(r.spool, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return f.Close()
}

// deliverSpool sends the spooled reports in batches and removes what was
// delivered; it reports whether the spool is now empty.
func (r *reporter) deliverSpool(ctx context.Context) bool {
	if r.spool == "" {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := os.ReadFile(r.spool)
	if os.IsNotExist(err) || (err == nil && len(data) == 0) {
		return true
	}
	if err != nil {
		r.log.Error("read report spool", "err", err)
		return false
	}
	var runs []RunReport
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 256<<10), 4<<20)
	for sc.Scan() {
		var rep RunReport
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			r.log.Error("skipping a corrupt line in the report spool", "err", err)
			continue
		}
		runs = append(runs, rep)
	}
	sent := 0
	for sent < len(runs) {
		end := min(sent+reportBatchSize, len(runs))
		if r.deliver(ctx, runs[sent:end]) != nil {
			break
		}
		sent = end
	}
	if sent == 0 {
		return false
	}
	if sent == len(runs) {
		if err := os.Remove(r.spool); err != nil {
			r.log.Error("remove delivered report spool", "err", err)
		}
		r.log.Info("delivered spooled run reports", "runs", sent)
		return true
	}
	// Keep the undelivered rest: write it to a new file and swap it in atomically.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := sent; i < len(runs); i++ {
		_ = enc.Encode(&runs[i])
	}
	tmp := r.spool + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err == nil {
		if err := os.Rename(tmp, r.spool); err != nil {
			r.log.Error("rewrite report spool", "err", err)
		}
	}
	return false
}
