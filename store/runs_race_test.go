package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Two masters given the same batch at once, a batch that meets a run stored
// already (a worker's retry after a timeout), round after round: on MySQL an
// INSERT that fails on a stored id keeps gap locks until its transaction
// ends, so two transactions that went on to insert the rest of the batch in
// the same transaction deadlocked (one rolled back and retried; a CI run saw
// it, and this test saw it in most of its runs before the fix). StoreRuns
// rolls back at once and looks the runs up first: no statement meets a
// deadlock, and every run is stored and counted once. PostgreSQL, which
// aborts a transaction at its first error, takes the same path.
func TestStoreRunsSameBatchTwiceAtOnceNeverDeadlocks(t *testing.T) {
	t.Parallel()
	storetest.RunServers(t, testStoreRunsSameBatchTwiceAtOnce)
}

func testStoreRunsSameBatchTwiceAtOnce(t *testing.T, s storetest.NamedStore) {
	ctx, db := storetest.Ctx(t), s.Store.DB
	now := time.Now().UTC().Truncate(time.Millisecond)
	tk := store.Task{ID: "tr", Title: "t", Type: "http", Spec: "{}", Keepers: "[]", Children: "[]", CreatedAt: now, UpdatedAt: now}
	if _, err := db.NewInsert().Model(&tk).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	dead := &storetest.DeadlockCounter{}
	db.AddQueryHook(dead)
	const rounds, size = 30, 40
	for round := range rounds {
		runs := func(from, to int) []store.Run {
			var out []store.Run
			for i := from; i <= to; i++ {
				at := now.Add(time.Duration(round*size+i) * time.Millisecond)
				out = append(out, store.Run{ID: fmt.Sprintf("race-%02d-%03d", round, i), TaskID: "tr", Node: "w1",
					ScheduledAt: at, StartedAt: at, EndedAt: at, Result: "success", Attempt: 1})
			}
			return out
		}
		// Stored already: one in the middle of the batch, so that the first
		// INSERT of each delivery inserts rows before failing on it.
		if _, err := store.StoreRuns(ctx, db, runs(size/2, size/2)); err != nil {
			t.Fatal(err)
		}
		batch := runs(1, size)
		var wg sync.WaitGroup
		fresh := make([][]store.Run, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				fresh[i], errs[i] = store.StoreRuns(ctx, db, batch)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, delivery %d: %v", round, i, err)
			}
		}
		if n := len(fresh[0]) + len(fresh[1]); n != size-1 {
			t.Fatalf("round %d: %d + %d runs new, want %d in all", round, len(fresh[0]), len(fresh[1]), size-1)
		}
	}
	if n := dead.N(); n != 0 {
		t.Fatalf("%d statements in %d rounds met a deadlock or lock wait timeout", n, rounds)
	}
	var got store.Task
	if err := db.NewSelect().Model(&got).Where("id = ?", "tr").Scan(ctx); err != nil || got.RunCount != rounds*size {
		t.Fatalf("run_count %d (%v), want %d", got.RunCount, err, rounds*size)
	}
}

// A claim that loses to a concurrent claim of the same fire by a deadlock
// (how Galera reports a claim that lost certification to another node's) is
// a lost race, not an error. Three inserts of one fire's claim: the first,
// uncommitted, makes the other two wait; when it rolls back, InnoDB grants
// both waiters a shared lock and each then waits for the other's, so one is
// chosen as a deadlock victim (1213). ClaimFire runs it again, meets the
// winner's claim, and answers with the winner. PostgreSQL lets one waiter
// insert and gives the other a duplicate key, without a deadlock: both
// answer with the same winner there too.
func TestClaimFireDeadlockIsALostRace(t *testing.T) {
	t.Parallel()
	storetest.RunServers(t, testClaimFireRace)
}

func testClaimFireRace(t *testing.T, s storetest.NamedStore) {
	dead := &storetest.DeadlockCounter{}
	s.Store.DB.AddQueryHook(dead)
	// InnoDB picks a victim when both waiters get the shared lock at once;
	// on a starved machine one may be granted first, and that round meets
	// no deadlock. Every round must answer one winner; on MySQL rounds go on
	// until one meets a deadlock (the condition this test needs), within a
	// generous deadline rather than a fixed number of tries.
	deadline := time.Now().Add(3 * time.Minute)
	for round := 1; ; round++ {
		claimFireRaceRound(t, s)
		if dead.N() > 0 || s.Name != "mysql" {
			if round > 1 {
				t.Logf("a deadlock met in round %d", round)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no claim met a deadlock in %d rounds (3 minutes): the test did not exercise the lost race", round)
		}
	}
}

// claimFireRaceRound races two claims of one fire behind a third one's
// uncommitted claim, then rolls that back.
func claimFireRaceRound(t *testing.T, s storetest.NamedStore) {
	ctx, db := storetest.Ctx(t), s.Store.DB
	task := "race-" + storetest.RandomHex(t, 4)
	fire := time.Now().UTC().Truncate(time.Second)
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback()
	if w, err := store.ClaimFire(ctx, first, task, fire, "w0", ""); err != nil || w != "w0" {
		t.Fatalf("first claim: %q %v", w, err)
	}
	type answer struct {
		winner string
		err    error
	}
	answers := make(chan answer, 2)
	for _, node := range []string{"w1", "w2"} {
		go func() {
			w, err := store.ClaimFire(ctx, db, task, fire, node, "")
			answers <- answer{w, err}
		}()
	}
	waiting := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE ?"
	pattern := "INSERT INTO `locks`%" + task + "%"
	if s.Name == "postgres" {
		waiting = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE ?"
		pattern = `INSERT INTO "locks"%` + task + "%"
	}
	storetest.Eventually(t, 60*time.Second, func() bool {
		var n int
		err := db.QueryRowContext(ctx, waiting, pattern).Scan(&n)
		return err == nil && n == 2
	}, "the two claims never waited for the first")
	if err := first.Rollback(); err != nil {
		t.Fatal(err)
	}
	a, b := <-answers, <-answers
	if a.err != nil || b.err != nil {
		t.Fatalf("claims answered with errors: %v, %v", a.err, b.err)
	}
	if a.winner != b.winner || (a.winner != "w1" && a.winner != "w2") {
		t.Fatalf("claims answered winners %q and %q, want one of w1, w2 for both", a.winner, b.winner)
	}
}
