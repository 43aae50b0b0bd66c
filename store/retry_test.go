package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/schedulemaster-go/schedulemaster/store"
)

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	my := func(n uint16, msg string) error { return &mysql.MySQLError{Number: n, Message: msg} }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"deadlock", my(1213, "Deadlock found when trying to get lock; try restarting transaction"), true},
		{"galera certification failure", my(1213, "WSREP detected deadlock/conflict and aborted the transaction. Try restarting the transaction"), true},
		{"lock wait timeout", my(1205, "Lock wait timeout exceeded; try restarting transaction"), true},
		{"galera node not ready", my(1047, "WSREP has not yet prepared node for application use"), true},
		{"commit failed", my(1180, "Got error 6 \"No such device or address\" during COMMIT"), true},
		{"snapshot conflict", my(1020, "Record has changed since last read in table 'leases'"), true},
		{"wrapped deadlock", fmt.Errorf("store: claim fire: %w", my(1213, "Deadlock")), true},
		{"duplicate key", my(1062, "Duplicate entry"), false},
		{"no such table", my(1146, "Table 'x' doesn't exist"), false},
		{"sqlite busy", errors.New("database is locked (5) (SQLITE_BUSY)"), true},
		{"sqlite busy, wrapped", fmt.Errorf("store: x: %w", errors.New("SQLITE_BUSY_SNAPSHOT")), true},
		{"conflict", store.ErrConflict, false},
		{"other", errors.New("connection refused"), false},
	}
	for _, c := range cases {
		if got := store.IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestRetryStopsAfterAttempts(t *testing.T) {
	t.Parallel()
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock"}
	calls := 0
	start := time.Now()
	err := store.Retry(context.Background(), func(context.Context) error { calls++; return deadlock })
	if calls != store.RetryAttempts {
		t.Fatalf("fn ran %d times, want RetryAttempts = %d", calls, store.RetryAttempts)
	}
	if !errors.Is(err, deadlock) {
		t.Fatalf("err = %v, want the last error", err)
	}
	// The waits are bounded: half the nominal backoff at least, 1.5 times at most.
	var nominal time.Duration
	for i := range store.RetryAttempts - 1 {
		nominal += min(store.RetryBackoff<<i, store.RetryMaxBackoff)
	}
	if took := time.Since(start); took < nominal/2 || took > nominal*3/2+time.Second {
		t.Fatalf("retries took %s, want about %s", took, nominal)
	}
}

func TestRetrySucceedsAfterTransientFailures(t *testing.T) {
	t.Parallel()
	calls := 0
	err := store.Retry(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Retry = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestRetryStopsAtOtherErrors(t *testing.T) {
	t.Parallel()
	calls := 0
	err := store.Retry(context.Background(), func(context.Context) error { calls++; return store.ErrConflict })
	if calls != 1 || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Retry of a non-retryable error: %d calls, %v", calls, err)
	}
	// RetryWhen also repeats the errors it is given.
	calls = 0
	err = store.RetryWhen(context.Background(), func(err error) bool { return errors.Is(err, store.ErrConflict) },
		func(context.Context) error {
			calls++
			if calls == 1 {
				return store.ErrConflict
			}
			return nil
		})
	if calls != 2 || err != nil {
		t.Fatalf("RetryWhen of a conflict: %d calls, %v", calls, err)
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	busy := errors.New("database is locked (5) (SQLITE_BUSY)")
	calls := 0
	err := store.Retry(ctx, func(context.Context) error {
		calls++
		cancel() // the caller goes away during the first attempt
		return busy
	})
	if calls != 1 {
		t.Fatalf("fn ran %d times after the context ended, want 1", calls)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, busy) {
		t.Fatalf("err = %v, want the context's error wrapping the last one", err)
	}
}
