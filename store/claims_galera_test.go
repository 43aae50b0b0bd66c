package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// A claim that loses to another node's claim on Galera is told the winner
// even when its node has not applied the winner's insert yet: node 2's
// applier is paused (FLUSH TABLES WITH READ LOCK) while node 0 records the
// winner, a plain read on node 2 still finds none, and the loser's read of
// the winner waits for node 2 to apply it instead of answering "".
func TestClaimLoserLearnsTheWinnerOnALaggingGaleraNode(t *testing.T) {
	t.Parallel()
	g := storetest.StartGalera(t)
	g.CreateDatabase(t, "claims")
	ctx := storetest.Ctx(t)
	open := func(i int) *store.Store {
		t.Helper()
		st, err := store.Open(ctx, store.DSN{Dialect: store.MySQL, Conn: g.DSN(i, "claims") + "&parseTime=true&loc=UTC"}, storetest.Discard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	s0 := open(0)
	s2 := open(2)
	fire := time.Now().UTC().Truncate(time.Second)
	// The migrations ran on node 0: wait until node 2 has the table.
	storetest.Eventually(t, 20*time.Second, func() bool {
		_, err := store.FireClaimWinner(ctx, s2.DB, "t", fire)
		return err == nil
	}, "node 2 never had the claims table")

	raw, err := sql.Open("mysql", g.DSN(2, "claims"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	lock, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := lock.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()

	if w, err := store.ClaimFire(ctx, s0.DB, "t", fire, "w0", "run-w0"); err != nil || w != "w0" {
		t.Fatalf("claim on node 0: %q %v", w, err)
	}
	if w, err := store.FireClaimWinner(ctx, s2.DB, "t", fire); err != nil || w != "" {
		t.Fatalf("plain read on the paused node 2: %q %v; the test needs a node that has not applied the claim", w, err)
	}
	type answer struct {
		w   string
		err error
	}
	got := make(chan answer, 1)
	go func() {
		w, err := store.WinnerAfterConflict(ctx, s2.DB, "t", fire)
		got <- answer{w, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("the loser's read answered %q %v while node 2 had not applied the winner", a.w, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	a := <-got
	if a.err != nil || a.w != "w0" {
		t.Fatalf("the loser's read of the winner: %q %v, want w0", a.w, a.err)
	}
}
