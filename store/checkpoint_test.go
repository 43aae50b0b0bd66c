package store_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// walUnderLoad writes total bytes into a SQLite store in small transactions
// while readers keep the WAL in use without a pause (what starves SQLite's
// own checkpoints), and returns the largest -wal file size seen.
func walUnderLoad(t *testing.T, s storetest.NamedStore, total int) int64 {
	t.Helper()
	ctx := storetest.Ctx(t)
	db := s.Store.DB
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS walload (id INTEGER PRIMARY KEY, body BLOB NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	walPath := s.DSN.Path + "-wal"
	var maxWAL atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // samples the -wal file
		defer wg.Done()
		for {
			if fi, err := os.Stat(walPath); err == nil && fi.Size() > maxWAL.Load() {
				maxWAL.Store(fi.Size())
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	// Readers that each hold a snapshot for a while (a slow list page),
	// staggered so that one always does: SQLite's own checkpoints then never
	// find the log free to start over.
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// BEGIN (deferred) by hand: the store's transactions begin
				// IMMEDIATE, as writers.
				if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
					t.Error(err)
					return
				}
				var n int
				_ = conn.QueryRowContext(ctx, "SELECT count(*) FROM walload").Scan(&n)
				time.Sleep(120 * time.Millisecond)
				if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	body := []byte(strings.Repeat("x", 16<<10))
	for written := 0; written < total; written += 8 * len(body) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		for range 8 {
			if _, err := tx.ExecContext(ctx, "INSERT INTO walload (body) VALUES (?)", body); err != nil {
				t.Fatalf("insert: %v", err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		// Keep the table small: the size of the WAL is what is measured.
		if _, err := db.ExecContext(ctx, "DELETE FROM walload WHERE id < (SELECT max(id) - 64 FROM walload)"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		// A master writes in bursts, not back to back without a pause.
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	return maxWAL.Load()
}

// TestCheckpointerKeepsTheWALBounded: 96 MiB written while long reads keep
// SQLite's own checkpoints from starting the log over (without the duty the
// -wal file grows past everything written) leave a -wal file below the
// threshold plus an interval's writes, with the checkpoint duty running.
func TestCheckpointerKeepsTheWALBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	t.Parallel()
	const total = 96 << 20
	const threshold = 8 << 20
	s := storetest.OpenSQLite(t)
	cp := store.NewCheckpointer(s.Store, s.DSN.Path, store.CheckpointConfig{Interval: 200 * time.Millisecond, Threshold: threshold},
		storetest.Logger(t))
	cp.Start(context.Background())
	defer cp.Stop()
	got := walUnderLoad(t, s, total)
	t.Logf("largest -wal file with the checkpointer: %.1f MiB for %d MiB written", float64(got)/(1<<20), total>>20)
	if got >= 4*threshold {
		t.Fatalf("the -wal file reached %d bytes for %d written: not bounded (threshold %d)", got, total, threshold)
	}
	// Stop is final and a second Stop is harmless.
	cp.Stop()
	cp.Stop()
	if err := cp.Checkpoint(storetest.Ctx(t)); err != nil {
		t.Fatalf("a checkpoint with nothing going on: %v", err)
	}
	if fi, err := os.Stat(s.DSN.Path + "-wal"); err != nil || fi.Size() != 0 {
		t.Fatalf("after a TRUNCATE checkpoint the -wal file is %v bytes (%v), want 0", fi.Size(), err)
	}
}
