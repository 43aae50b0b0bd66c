package storetest_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The Galera harness itself, and the figure the masters' failover bound on
// Galera rests on: how long the surviving nodes commit nothing when a node
// dies (kill -9) or freezes (SIGSTOP), until the cluster evicts it. A write
// on node 0 replicates to node 2; node 2 is killed and comes back by IST
// with the data written meanwhile; then frozen and thawed.
func TestGaleraCommitStallOnNodeFault(t *testing.T) {
	t.Parallel()
	g := storetest.StartGalera(t)
	g.CreateDatabase(t, "probe")
	db0 := openDB(t, g.DSN(0, "probe"))
	exec(t, db0, "CREATE TABLE t (id INT PRIMARY KEY, v BIGINT NOT NULL)")
	exec(t, db0, "INSERT INTO t VALUES (1, 0)")
	db2 := openDB(t, g.DSN(2, "probe"))
	waitValue(t, db2, 0, "the row written on node 0, read on node 2")

	// The commit stall a fault costs the survivors: commits every 20 ms on
	// node 0, the longest one measured from the fault. The bound is the
	// masters' lease at the tests' 1 s health interval: a stall under it
	// leaves a failover within lease + interval.
	const bound = 3 * time.Second
	stall := func(what string, fault func()) {
		t.Helper()
		stop := make(chan struct{})
		result := make(chan time.Duration)
		go func() {
			var worst time.Duration
			for {
				select {
				case <-stop:
					result <- worst
					return
				default:
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := db0.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE id = 1")
				cancel()
				if err != nil {
					t.Errorf("commit on node 0 during %s: %v", what, err)
				}
				worst = max(worst, time.Since(start))
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(300 * time.Millisecond)
		fault()
		g.WaitSize(t, 2, 30*time.Second)
		time.Sleep(200 * time.Millisecond) // a last commit after the new view
		close(stop)
		d := <-result
		t.Logf("%s: commits on the survivors stalled %s (evs options %q)", what, d.Round(time.Millisecond), g.Eviction)
		if d > bound && g.Eviction == storetest.GaleraEviction {
			t.Errorf("%s: commits stalled %s, want under %s with %s", what, d, bound, storetest.GaleraEviction)
		}
	}

	n2 := g.Nodes[2]
	stall("kill -9 of node 2", n2.Kill)
	exec(t, db0, "UPDATE t SET v = 1000 WHERE id = 1")
	start := time.Now()
	n2.Restart(t)
	g.WaitSize(t, 3, 30*time.Second)
	t.Logf("node 2 rejoined (IST) in %s", time.Since(start).Round(time.Millisecond))
	waitValue(t, db2, 1000, "the row written while node 2 was down, read on node 2 after its restart")

	stall("SIGSTOP of node 2", n2.Freeze)
	n2.Thaw()
	start = time.Now()
	g.WaitSize(t, 3, 30*time.Second)
	t.Logf("node 2 back after SIGCONT in %s", time.Since(start).Round(time.Millisecond))
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// waitValue polls the row on db until its value is v (a node applies
// replicated writes a moment after the commit on another).
func waitValue(t *testing.T, db *sql.DB, v int64, what string) {
	t.Helper()
	storetest.Eventually(t, 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var got int64
		err := db.QueryRowContext(ctx, "SELECT v FROM t WHERE id = 1").Scan(&got)
		return err == nil && got == v
	}, "%s: want %d", what, v)
}
