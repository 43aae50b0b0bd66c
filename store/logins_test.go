package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The shared login throttle: the limit-th failure in a window blocks the key
// until the window ends, a later failure starts a new window, a success
// clears it, and concurrent failures (several masters) are all counted.
func TestLoginFailuresSharedThrottle(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		db := s.Store.DB
		const window = 15 * time.Minute
		t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		blocked := func(key string, at time.Time) time.Time {
			t.Helper()
			until, err := store.LoginBlockedUntil(ctx, db, []string{key, "other"}, at)
			if err != nil {
				t.Fatal(err)
			}
			return until
		}
		for i := range 3 {
			if u := blocked("k", t0.Add(time.Duration(i)*time.Second)); !u.IsZero() {
				t.Fatalf("blocked after %d failures (until %s)", i, u)
			}
			if err := store.RecordLoginFailure(ctx, db, "k", 3, window, t0.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if u := blocked("k", t0.Add(10*time.Second)); !u.Equal(t0.Add(window)) {
			t.Fatalf("blocked until %s, want the end of the window %s", u, t0.Add(window))
		}
		// After the window: free again, and a failure starts a new window.
		later := t0.Add(window + time.Second)
		if u := blocked("k", later); !u.IsZero() {
			t.Fatalf("still blocked after the window: %s", u)
		}
		if err := store.RecordLoginFailure(ctx, db, "k", 3, window, later); err != nil {
			t.Fatal(err)
		}
		if u := blocked("k", later); !u.IsZero() {
			t.Fatalf("one failure in a new window blocks: %s", u)
		}
		// Pruning keeps the live window; clearing forgets the key.
		if n, err := store.PruneLoginFailures(ctx, db, later.Add(-window), later); err != nil || n != 0 {
			t.Fatalf("prune of a live key: %d %v", n, err)
		}
		if err := store.ClearLoginFailures(ctx, db, "k"); err != nil {
			t.Fatal(err)
		}
		// Concurrent failures of one key (as from several masters): none is lost.
		const workers, each = 4, 5
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if err := store.RecordLoginFailure(ctx, db, "c", 1000, window, t0); err == nil {
						mu.Lock()
						ok++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT failures FROM login_failures WHERE k = ?", "c").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != ok || ok == 0 {
			t.Fatalf("recorded %d failures, %d calls succeeded", n, ok)
		}
		if n, err := store.PruneLoginFailures(ctx, db, t0.Add(time.Hour), t0.Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("prune of an old key: %d %v, want 1", n, err)
		}
	})
}
