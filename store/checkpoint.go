package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// WAL bounds of a SQLite database. SQLite checkpoints its write-ahead log
// itself every WALAutoCheckpointPages pages, but a checkpoint that runs while
// readers still use the log cannot start it over, and under steady reads and
// writes (a busy master) it never may: the -wal file then grows without end
// (1.17 GB was seen). The Checkpointer watches the file: past
// CheckpointThreshold it runs TRUNCATE checkpoints, which wait for the
// readers of older snapshots, copy the log into the database and empty the
// file, until one completes; journal_size_limit trims the file to
// WALSizeLimit whenever SQLite's own checkpoints start the log over. The
// -wal file so stays below CheckpointThreshold plus what is written in one
// CheckpointInterval, unless readers keep every checkpoint from completing
// for intervals on end (logged).
const (
	WALAutoCheckpointPages = 1000     // SQLite's default, stated: about 4 MiB with 4 KiB pages
	WALSizeLimit           = 64 << 20 // journal_size_limit, bytes
	CheckpointThreshold    = 32 << 20 // -wal size past which the Checkpointer truncates
	CheckpointInterval     = 10 * time.Second
	// CheckpointBusy is how long a TRUNCATE checkpoint waits for readers
	// and the writer before it gives up until the next interval: writers
	// wait for it meanwhile, so it is short.
	CheckpointBusy = 500 * time.Millisecond
	// sqliteBusyTimeout is how long a statement waits for a lock.
	sqliteBusyTimeout = 10 * time.Second
)

// CheckpointConfig tunes a Checkpointer; zero fields take the defaults
// (CheckpointInterval, CheckpointThreshold, CheckpointBusy).
type CheckpointConfig struct {
	Interval  time.Duration
	Threshold int64
	Busy      time.Duration
}

// Checkpointer is the background duty that keeps a SQLite database's -wal
// file bounded (see WALSizeLimit). On MySQL it does nothing.
type Checkpointer struct {
	st      *Store
	walPath string
	cfg     CheckpointConfig
	log     *slog.Logger

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	failing int // checkpoints in a row that did not complete: logged once per change
}

// NewCheckpointer makes the checkpoint duty of st, whose SQLite file is
// path.
func NewCheckpointer(st *Store, path string, cfg CheckpointConfig, log *slog.Logger) *Checkpointer {
	if cfg.Interval <= 0 {
		cfg.Interval = CheckpointInterval
	}
	if cfg.Threshold <= 0 {
		cfg.Threshold = CheckpointThreshold
	}
	if cfg.Busy <= 0 {
		cfg.Busy = CheckpointBusy
	}
	return &Checkpointer{st: st, walPath: path + "-wal", cfg: cfg, log: log}
}

// Start runs the duty until Stop or ctx ends. Starting twice is a no-op.
func (c *Checkpointer) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.Dialect != SQLite || c.done != nil {
		return
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	go c.loop(ctx, c.done)
}

// Stop ends the duty and waits for a checkpoint in progress.
func (c *Checkpointer) Stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (c *Checkpointer) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(c.walPath)
		if err != nil || fi.Size() < c.cfg.Threshold {
			continue // SQLite's own checkpoints keep up
		}
		err = c.Checkpoint(ctx)
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		was := c.failing
		if err != nil {
			c.failing++
		} else {
			c.failing = 0
		}
		c.mu.Unlock()
		switch {
		case err != nil && was == 0:
			c.log.Warn("sqlite: the WAL file passed its bound and a checkpoint could not complete (long reads); tried again every interval",
				"wal_bytes", fi.Size(), "threshold", c.cfg.Threshold, "interval", c.cfg.Interval, "err", err)
		case err == nil && was > 0:
			c.log.Info("sqlite: WAL checkpoint complete again", "failed_before", was)
		}
	}
}

// Checkpoint runs one TRUNCATE checkpoint now, waiting at most the
// configured Busy for readers and the writer. It fails when they kept it
// from completing.
func (c *Checkpointer) Checkpoint(ctx context.Context) error {
	conn, err := c.st.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: wal checkpoint: %w", err)
	}
	defer conn.Close()
	// On a connection of its own with a short busy timeout: writers queue
	// behind a waiting checkpoint, so it must not wait long.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", c.cfg.Busy.Milliseconds())); err != nil {
		return fmt.Errorf("store: wal checkpoint: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", sqliteBusyTimeout.Milliseconds()))
	var busy, logFrames, done int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("store: wal checkpoint: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("store: wal checkpoint: busy (%d of %d frames copied)", done, logFrames)
	}
	return nil
}
