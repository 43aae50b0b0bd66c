package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// fenceFixture is a running worker w1 and the cluster lease held by old
// under epoch 1 for a minute; take hands it to a new master.
type fenceFixture struct {
	db    *bun.DB
	old   *store.Fence
	start time.Time
}

func newFenceFixture(t *testing.T, ctx context.Context, s storetest.NamedStore, holder string) fenceFixture {
	t.Helper()
	db := s.Store.DB
	if err := store.CreateNode(ctx, db, newWorkerNode("w1")); err != nil {
		t.Fatal(err)
	}
	if err := store.TransitionNode(ctx, db, "w1", store.Transition{From: []store.NodeStatus{store.StatusOffline}, To: store.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	epoch, err := store.TakeLease(ctx, db, store.ClusterLease, holder, 0, false, now, time.Minute)
	if err != nil || epoch != 1 {
		t.Fatalf("take the lease: %d %v", epoch, err)
	}
	return fenceFixture{db: db, old: &store.Fence{Lease: store.ClusterLease, Holder: holder, Epoch: epoch}, start: now}
}

// take makes m2 the holder under epoch 2, as a master whose clock says the
// old lease has expired would (the old holder's own clock says it has not:
// it is paused, or its clock is slow).
func (f fenceFixture) take(ctx context.Context, db bun.IDB) (*store.Fence, error) {
	epoch, err := store.TakeLease(ctx, db, store.ClusterLease, "m2", f.old.Epoch, false, f.start.Add(2*time.Minute), time.Minute)
	if err != nil {
		return nil, err
	}
	return &store.Fence{Lease: store.ClusterLease, Holder: "m2", Epoch: epoch}, nil
}

func fenceSeq(t *testing.T, ctx context.Context, db bun.IDB) int64 {
	t.Helper()
	l, err := store.GetLease(ctx, db, store.ClusterLease)
	if err != nil {
		t.Fatal(err)
	}
	return l.FenceSeq
}

// A stale leader's fenced writes change nothing once another master took
// the lease, whatever the write; the new leader's go through, and each of
// its fenced writes is a write of the lease row (fence_seq counts them).
func TestFencedWritesRefusedAfterTakeover(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		f := newFenceFixture(t, ctx, s, "m1")
		db := f.db
		if _, _, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(1), "1", f.start.Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		// Before the takeover the old holder's fence holds.
		if err := store.MarkSeen(ctx, db, []string{"w1"}, f.start, f.old); err != nil {
			t.Fatal(err)
		}
		if got := fenceSeq(t, ctx, db); got != 1 {
			t.Fatalf("fence_seq after one fenced write = %d, want 1", got)
		}
		fresh, err := f.take(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		before := mustGet(t, ctx, s, "w1")

		err = store.TransitionNode(ctx, db, "w1", store.Transition{
			From: []store.NodeStatus{store.StatusRunning}, To: store.StatusOffline, Fence: f.old,
		})
		if !errors.Is(err, store.ErrLeaseLost) || !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stale TransitionNode: %v, want ErrLeaseLost (an ErrConflict)", err)
		}
		if off, err := store.RecordProbeFailure(ctx, db, "w1", 1, "down", f.old); off || err != nil {
			t.Fatalf("stale RecordProbeFailure: %v %v, want false nil", off, err)
		}
		if err := store.MarkSeen(ctx, db, []string{"w1"}, f.start.Add(time.Hour), f.old); err != nil {
			t.Fatalf("stale MarkSeen: %v", err)
		}
		if n, err := store.ClaimDelayed(ctx, db, []string{delayedID(1)}, "w1", "x", f.start, f.start, f.start.Add(time.Minute), f.start, f.old); n != 0 || err != nil {
			t.Fatalf("stale ClaimDelayed: %d %v", n, err)
		}
		if n, err := store.DeferDelayed(ctx, db, []string{delayedID(1)}, f.start.Add(time.Hour), "x", f.old); n != 0 || err != nil {
			t.Fatalf("stale DeferDelayed: %d %v", n, err)
		}
		// Inside a caller's transaction the refusal writes nothing either.
		err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			return store.TransitionNode(ctx, tx, "w1", store.Transition{
				From: []store.NodeStatus{store.StatusRunning}, To: store.StatusIdle, Fence: f.old,
			})
		})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("stale TransitionNode in a transaction: %v", err)
		}
		after := mustGet(t, ctx, s, "w1")
		if after.Status != before.Status || after.Failures != before.Failures || !after.LastSeen.Equal(before.LastSeen) || after.Reason != before.Reason {
			t.Fatalf("a stale leader changed w1: %+v -> %+v", before, after)
		}
		if d, err := store.GetDelayed(ctx, db, delayedID(1)); err != nil || d.Status != store.DelayedPending || d.Dispatches != 0 || d.LastError != "" {
			t.Fatalf("a stale leader changed the delayed task: %+v %v", d, err)
		}
		if got := fenceSeq(t, ctx, db); got != 1 {
			t.Fatalf("fence_seq after refused writes = %d, want 1 (a refused fence writes nothing)", got)
		}

		// The new leader's fence holds.
		if err := store.TransitionNode(ctx, db, "w1", store.Transition{
			From: []store.NodeStatus{store.StatusRunning}, To: store.StatusIdle, Fence: fresh,
		}); err != nil {
			t.Fatalf("the new leader's TransitionNode: %v", err)
		}
		if got := mustGet(t, ctx, s, "w1").Status; got != store.StatusIdle {
			t.Fatalf("w1 is %v after the new leader's transition, want idle", got)
		}
		if got := fenceSeq(t, ctx, db); got != 2 {
			t.Fatalf("fence_seq after the new leader's write = %d, want 2", got)
		}
	})
}

// The fence refuses where a read of the lease row would have passed.
//
// Under way: the new master's takeover is written but not committed. A read
// of the lease row (what the old fence was, and what a Galera node that has
// not applied the takeover yet returns) still shows the old holder. The
// fenced write's conditional update of the lease row cannot pass by it: it
// waits for the takeover's lock (InnoDB, SQLite's single writer), then finds
// the new epoch and is refused. On Galera the two writes of the lease row
// are certified against each other, so they cannot both commit.
//
// Behind a snapshot (MySQL/MariaDB): the old leader's transaction read the
// lease before a takeover committed; its reads keep showing itself as the
// holder (a stale read), but its fenced write reads the row as it is now.
func TestFenceIsAWriteNotARead(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		holder := "stale-" + storetest.RandomHex(t, 4)
		f := newFenceFixture(t, ctx, s, holder)
		db := f.db

		takeover, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer takeover.Rollback()
		if _, err := f.take(ctx, takeover); err != nil {
			t.Fatal(err)
		}
		// A read now passes the old fence's condition.
		l, err := store.GetLease(ctx, db, store.ClusterLease)
		if err != nil {
			t.Fatal(err)
		}
		if l.Holder != holder || l.Epoch != f.old.Epoch || !l.ExpiresAt.After(time.Now()) {
			t.Fatalf("a read during the takeover shows %+v; want the old holder, still valid", l)
		}
		done := make(chan error, 1)
		go func() {
			done <- store.TransitionNode(ctx, db, "w1", store.Transition{
				From: []store.NodeStatus{store.StatusRunning}, To: store.StatusOffline, Fence: f.old,
			})
		}()
		var early error
		var ended bool
		finished := func() bool {
			if !ended {
				select {
				case early = <-done:
					ended = true
				default:
				}
			}
			return ended
		}
		if s.Name == "mysql" {
			// Wait until the fenced write is at its lease update, which waits
			// for the takeover's row lock (a read-only fence would not wait).
			storetest.Eventually(t, 10*time.Second, func() bool {
				var n int
				err := s.Store.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE ?",
					"UPDATE %fence_seq%"+holder+"%").Scan(&n)
				return finished() || err == nil && n == 1
			}, "the fenced write never waited for the takeover's lock")
		}
		if finished() {
			t.Fatalf("the fenced write finished (%v) while a takeover of its lease was under way", early)
		}
		if err := takeover.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("the fenced write after the takeover: %v, want ErrLeaseLost", err)
		}
		if got := mustGet(t, ctx, s, "w1").Status; got != store.StatusRunning {
			t.Fatalf("w1 is %v; the stale leader's write went through", got)
		}

		if s.Name != "mysql" {
			return // SQLite: a transaction that may write holds the only write lock from its start; no stale snapshot
		}
		// Behind a snapshot: m2 holds the lease now; it is the stale one.
		stale := &store.Fence{Lease: store.ClusterLease, Holder: "m2", Epoch: 2}
		old, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Rollback()
		if l, err := store.GetLease(ctx, old, store.ClusterLease); err != nil || l.Holder != "m2" {
			t.Fatalf("snapshot read: %+v %v", l, err)
		}
		if _, err := store.TakeLease(ctx, db, store.ClusterLease, "m3", 2, false, time.Now().Add(time.Hour), time.Hour); err != nil {
			t.Fatal(err)
		}
		l, err = store.GetLease(ctx, old, store.ClusterLease)
		if err != nil || l.Holder != "m2" || l.Epoch != 2 {
			t.Fatalf("the stale transaction reads %+v %v; want m2's lease still (its snapshot)", l, err)
		}
		err = store.TransitionNode(ctx, old, "w1", store.Transition{
			From: []store.NodeStatus{store.StatusRunning}, To: store.StatusOffline, Fence: stale,
		})
		if !errors.Is(err, store.ErrLeaseLost) && !store.IsRetryable(err) {
			t.Fatalf("the fenced write behind a stale snapshot: %v, want it refused", err)
		}
		if err := old.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, ctx, s, "w1").Status; got != store.StatusRunning {
			t.Fatalf("w1 is %v; the write behind a stale snapshot went through", got)
		}
	})
}
