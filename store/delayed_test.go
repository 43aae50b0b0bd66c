package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func newDelayed(id, key string, due time.Time) *store.DelayedTask {
	return &store.DelayedTask{
		ID: id, SourceApp: "shop", Topic: "order.timeout", ContentKey: key, DueAt: due, NextAt: due,
		NotifyURL: "http://127.0.0.1:1/cb", NotifyBody: `{"order":42}`, ContentType: "application/json", Retries: 2,
	}
}

func delayedID(i int) string { return fmt.Sprintf("%032x", i) }

// Creation is idempotent by (source_app, topic, content_key) while the task
// is pending or running, also when many creations race; once it finished, the
// same key makes a new task.
func TestDelayedCreateIdempotent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		due := time.Now().Add(time.Hour)
		first, created, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(1), "42", due))
		if err != nil || !created {
			t.Fatalf("first create: %v, created %v", err, created)
		}
		again, created, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(2), "42", due.Add(time.Hour)))
		if err != nil || created || again.ID != first.ID || again.DueAt.Sub(due).Abs() > time.Millisecond {
			t.Fatalf("same key again: %+v created %v err %v; want the first one unchanged", again, created, err)
		}
		// Another key, another topic or another app is another task.
		other := newDelayed(delayedID(3), "43", due)
		if _, created, err := store.CreateDelayed(ctx, db, other); err != nil || !created {
			t.Fatalf("other key: %v %v", created, err)
		}
		otherApp := newDelayed(delayedID(4), "42", due)
		otherApp.SourceApp = "billing"
		if _, created, err := store.CreateDelayed(ctx, db, otherApp); err != nil || !created {
			t.Fatalf("other app: %v %v", created, err)
		}

		// Many concurrent creations of one new key: exactly one task.
		const n = 16
		var wg sync.WaitGroup
		ids := make([]string, n)
		errs := make([]error, n)
		var createdCount int
		var mu sync.Mutex
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, c, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(100+i), "race", due))
				errs[i] = err
				if err == nil {
					ids[i] = d.ID
					if c {
						mu.Lock()
						createdCount++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("concurrent create %d: %v", i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("concurrent creates answered different tasks: %v", ids)
			}
		}
		if createdCount != 1 {
			t.Fatalf("%d creations reported created, want 1", createdCount)
		}
		if _, total, _ := store.ListDelayed(ctx, db, store.DelayedFilter{Topic: "order.timeout", SourceApp: "shop"}); total != 3 {
			t.Fatalf("tasks of shop/order.timeout: %d, want 3 (42, 43, race)", total)
		}

		// Cancelled, the key is free again.
		if err := store.CancelDelayed(ctx, db, first.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		fresh, created, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(5), "42", due))
		if err != nil || !created || fresh.ID == first.ID {
			t.Fatalf("create after cancel: %+v %v %v; want a new task", fresh, created, err)
		}
	})
}

// Each transition is conditional on the state it leaves: claims take a task
// once, a run of a superseded sending cannot finish it, cancel takes only
// pending tasks.
func TestDelayedTransitions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		now := time.Now()
		for i := 1; i <= 3; i++ {
			d := newDelayed(delayedID(i), fmt.Sprint(i), now.Add(-time.Duration(i)*time.Minute))
			if _, _, err := store.CreateDelayed(ctx, db, d); err != nil {
				t.Fatal(err)
			}
		}
		future := newDelayed(delayedID(9), "future", now.Add(time.Hour))
		if _, _, err := store.CreateDelayed(ctx, db, future); err != nil {
			t.Fatal(err)
		}
		due, err := store.DueDelayed(ctx, db, now, 10)
		if err != nil || len(due) != 3 || due[0].ID != delayedID(3) {
			t.Fatalf("due: %v %v; want the 3 past ones, earliest first", due, err)
		}
		next, ok, err := store.NextDelayedAt(ctx, db, store.DelayedPending)
		if err != nil || !ok || !next.Equal(due[0].NextAt) {
			t.Fatalf("next: %v %v %v", next, ok, err)
		}
		if _, ok, err := store.NextDelayedAt(ctx, db, store.DelayedRunning); ok || err != nil {
			t.Fatalf("next running: %v %v", ok, err)
		}

		// Two claimants race for the same tasks: each task goes to one.
		ids := []string{delayedID(1), delayedID(2), delayedID(3), delayedID(9)}
		deadline := now.Add(time.Minute)
		lateBefore := now.Add(-90 * time.Second) // 2 and 3 minutes late: late; 1 minute: not
		n1, err := store.ClaimDelayed(ctx, db, ids[:2], "w1", "claimA", now, now, deadline, lateBefore, nil)
		if err != nil || n1 != 2 {
			t.Fatalf("claim A: %d %v", n1, err)
		}
		n2, err := store.ClaimDelayed(ctx, db, ids, "w2", "claimB", now, now, deadline, lateBefore, nil)
		if err != nil || n2 != 1 {
			t.Fatalf("claim B: %d %v; want only task 3 (9 is not due, 1 and 2 are taken)", n2, err)
		}
		wonA, _ := store.ClaimedDelayed(ctx, db, ids, "claimA")
		wonB, _ := store.ClaimedDelayed(ctx, db, ids, "claimB")
		if len(wonA) != 2 || len(wonB) != 1 || wonB[0].ID != delayedID(3) || wonB[0].Node != "w2" || wonB[0].Dispatches != 1 {
			t.Fatalf("claimed A %+v, B %+v", wonA, wonB)
		}
		for _, w := range append(wonA, wonB...) {
			wantLate := w.ID != delayedID(1)
			if w.Late != wantLate || w.FiredAt.IsZero() || w.Status != store.DelayedRunning {
				t.Errorf("claimed %s: late %v (want %v), fired %v, status %s", w.ID, w.Late, wantLate, w.FiredAt, w.Status)
			}
		}

		// Cancel: only pending tasks.
		if err := store.CancelDelayed(ctx, db, delayedID(1), now); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("cancel a running task: %v, want ErrConflict", err)
		}
		if err := store.CancelDelayed(ctx, db, delayedID(9), now); err != nil {
			t.Fatalf("cancel a pending task: %v", err)
		}
		if err := store.CancelDelayed(ctx, db, delayedID(9), now); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("cancel twice: %v, want ErrConflict", err)
		}

		// Task 1: its sending fails, a retry follows (attempts 0 → 1).
		if err := store.RetryDelayed(ctx, db, delayedID(1), 1, 0, 1, now.Add(time.Second), "failed on w1", nil); err != nil {
			t.Fatal(err)
		}
		// The same outcome applied twice changes nothing more.
		if err := store.RetryDelayed(ctx, db, delayedID(1), 1, 0, 1, now.Add(time.Second), "failed on w1", nil); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("retry twice: %v", err)
		}
		// Sent again (dispatch 2): a report of sending 1 cannot finish it.
		if n, err := store.ClaimDelayed(ctx, db, ids[:1], "w2", "claimC", now.Add(2*time.Second), now.Add(2*time.Second), deadline, lateBefore, nil); err != nil || n != 1 {
			t.Fatalf("claim again: %d %v", n, err)
		}
		if err := store.FinishDelayed(ctx, db, delayedID(1), 1, 1, store.DelayedSuccess, "", now); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("finish by a superseded sending: %v", err)
		}
		if err := store.FinishDelayed(ctx, db, delayedID(1), 2, 0, store.DelayedSuccess, "", now); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("finish with a stale attempt count: %v", err)
		}
		if err := store.FinishDelayed(ctx, db, delayedID(1), 2, 1, store.DelayedFailed, "failed again", now); err != nil {
			t.Fatal(err)
		}
		d1, _ := store.GetDelayed(ctx, db, delayedID(1))
		if d1.Status != store.DelayedFailed || d1.Attempts != 2 || d1.Dispatches != 2 || d1.PendingKey != nil || d1.FinishedAt.IsZero() || d1.Late {
			t.Fatalf("task 1 at the end: %+v", d1)
		}
		// A finished task cannot succeed by a late report.
		if err := store.SucceedDelayed(ctx, db, delayedID(1), now); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("succeed a failed task: %v", err)
		}
		// Task 2: given back (its worker died), then a late success of that
		// sending ends it: the callback was made.
		if err := store.RetryDelayed(ctx, db, delayedID(2), 1, 0, 0, now, "w1 offline", nil); err != nil {
			t.Fatal(err)
		}
		if err := store.SucceedDelayed(ctx, db, delayedID(2), now); err != nil {
			t.Fatal(err)
		}
		d2, _ := store.GetDelayed(ctx, db, delayedID(2))
		if d2.Status != store.DelayedSuccess || d2.Attempts != 1 || d2.PendingKey != nil {
			t.Fatalf("task 2: %+v", d2)
		}

		counts, err := store.CountDelayedByStatus(ctx, db, nil)
		if err != nil || counts[store.DelayedFailed] != 1 || counts[store.DelayedSuccess] != 1 ||
			counts[store.DelayedRunning] != 1 || counts[store.DelayedCancelled] != 1 {
			t.Fatalf("counts %v %v", counts, err)
		}
		list, total, err := store.ListDelayed(ctx, db, store.DelayedFilter{Status: store.DelayedRunning})
		if err != nil || total != 1 || list[0].ID != delayedID(3) {
			t.Fatalf("running: %v %d %v", list, total, err)
		}
	})
}

// A fenced claim by a master that does not hold the lease changes nothing.
func TestDelayedClaimFenced(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		now := time.Now()
		if _, _, err := store.CreateDelayed(ctx, db, newDelayed(delayedID(1), "1", now.Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		epoch, err := store.TakeLease(ctx, db, store.ClusterLease, "m1", 0, false, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		stale := &store.Fence{Lease: store.ClusterLease, Holder: "m2", Epoch: epoch}
		if n, err := store.ClaimDelayed(ctx, db, []string{delayedID(1)}, "w1", "x", now, now, now.Add(time.Minute), now, stale); err != nil || n != 0 {
			t.Fatalf("claim under another master's fence: %d %v", n, err)
		}
		good := &store.Fence{Lease: store.ClusterLease, Holder: "m1", Epoch: epoch}
		if n, err := store.ClaimDelayed(ctx, db, []string{delayedID(1)}, "w1", "y", now, now, now.Add(time.Minute), now, good); err != nil || n != 1 {
			t.Fatalf("claim under the leader's fence: %d %v", n, err)
		}
	})
}
