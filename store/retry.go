package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
)

// Bounds of Retry. RetryAttempts counts every run of the function, the first
// included. The wait before the second run is about RetryBackoff; each further
// wait doubles, up to RetryMaxBackoff, and is drawn from half to one and a
// half times that, so that the transactions that collided do not collide
// again in step. Five runs wait 20+40+80+160 ms on average, 450 ms at most:
// long enough for a deadlock or a certification conflict to clear, short
// enough to stay well inside a request's deadline.
const (
	RetryAttempts   = 5
	RetryBackoff    = 20 * time.Millisecond
	RetryMaxBackoff = 250 * time.Millisecond
)

// MySQL and MariaDB (Galera included) error numbers that mean "run the
// transaction again". PostgreSQL's are in postgres.go.
const (
	// mysqlDeadlock is ER_LOCK_DEADLOCK: an InnoDB deadlock, and also how
	// Galera reports a transaction that lost certification to a conflicting
	// write set of another node, or was aborted by one ("WSREP detected
	// deadlock/conflict"). The transaction was rolled back.
	mysqlDeadlock = 1213
	// mysqlLockWaitTimeout is ER_LOCK_WAIT_TIMEOUT.
	mysqlLockWaitTimeout = 1205
	// mysqlWSREPNotReady is ER_UNKNOWN_COM_ERROR, which Galera sends as
	// "WSREP has not yet prepared node for application use" while its node
	// is outside the primary component or still joining. The store sends no
	// command a server could not know, so the number alone is taken.
	mysqlWSREPNotReady = 1047
	// mysqlCommitFailed is ER_ERROR_DURING_COMMIT: the commit failed (on
	// Galera, a write set that could not be replicated or certified).
	mysqlCommitFailed = 1180
	// mysqlRecordChanged is ER_CHECKREAD: MariaDB 11.6+ with
	// innodb_snapshot_isolation refuses to write a row changed since the
	// transaction's snapshot.
	mysqlRecordChanged = 1020
)

// IsRetryable reports whether a transaction failed only because of
// concurrent ones or a database node that is briefly unable to commit: a
// deadlock or lock wait timeout, a Galera certification failure (which
// surfaces as a deadlock), Galera's 1047 and 1180, MariaDB's snapshot
// conflict 1020, PostgreSQL's serialization failure, deadlock, lock timeout
// and "cannot connect now", or SQLite busy. The transaction was rolled back (or never
// ran), so running it again is safe and likely to succeed. This is the one
// list of such errors; Retry acts on it.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlDeadlock, mysqlLockWaitTimeout, mysqlWSREPNotReady, mysqlCommitFailed, mysqlRecordChanged:
			return true
		}
		return false
	}
	switch pgCode(err) {
	case pgSerializationFailure, pgDeadlock, pgLockNotAvailable, pgCannotConnectNow:
		return true
	}
	s := err.Error()
	return strings.Contains(s, "SQLITE_BUSY") || strings.Contains(s, "database is locked")
}

// isLostToConcurrentWrite reports whether err says that a concurrent write
// of the same rows won: a deadlock or, on Galera, a certification conflict
// (both are 1213), or PostgreSQL's deadlock or serialization failure.
// Unlike the other retryable errors it says nothing about the health of the
// database node.
// isUnsupportedStatement reports whether MySQL refused a statement as not
// its syntax (1064: MySQL has no SET STATEMENT) or naming an unknown
// variable (1193: a server without wsrep_sync_wait).
func isUnsupportedStatement(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1064 || me.Number == 1193)
}

func isLostToConcurrentWrite(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == mysqlDeadlock
	}
	switch pgCode(err) {
	case pgDeadlock, pgSerializationFailure:
		return true
	}
	return false
}

// Retry runs fn until it returns nil or an error that IsRetryable does not
// accept, at most RetryAttempts times with a growing wait between runs
// (RetryBackoff), and returns its last error. fn must be safe to run again
// after a retryable error: one transaction of its own (rolled back whole on
// such an error) or one autocommit statement, never a statement inside an
// enclosing transaction, which the error has already rolled back. When ctx
// ends during a wait, Retry returns ctx's error wrapping fn's last one.
func Retry(ctx context.Context, fn func(ctx context.Context) error) error {
	return retry(ctx, RetryAttempts, RetryBackoff, IsRetryable, fn)
}

// RetryWhen is Retry that also runs fn again after the errors also accepts
// (such as ErrConflict, where fn reads afresh what changed underneath).
func RetryWhen(ctx context.Context, also func(error) bool, fn func(ctx context.Context) error) error {
	return retry(ctx, RetryAttempts, RetryBackoff, func(err error) bool { return IsRetryable(err) || also(err) }, fn)
}

// RetryTx runs fn in a transaction of db under Retry. When db is a
// transaction already, fn runs once in a savepoint of it: a retryable error
// there ends the enclosing transaction, whose owner retries it.
func RetryTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.Tx) error) error {
	if isTx(db) {
		return db.RunInTx(ctx, nil, fn)
	}
	return Retry(ctx, func(ctx context.Context) error { return db.RunInTx(ctx, nil, fn) })
}

// retry is Retry with its bounds and its test of errors given.
func retry(ctx context.Context, attempts int, backoff time.Duration, again func(error) bool, fn func(ctx context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || attempt >= attempts || !again(err) {
			return err
		}
		wait := min(backoff<<(attempt-1), RetryMaxBackoff)
		if wait > 0 {
			wait = wait/2 + rand.N(wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("store: %w while waiting to run again after: %w", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// isTx reports whether db is a transaction (statements in it cannot be
// retried on their own).
func isTx(db bun.IDB) bool {
	switch db.(type) {
	case bun.Tx, *bun.Tx:
		return true
	}
	return false
}

// UnreachableError is a connection to the database that could not be made,
// or (PostgreSQL) one that broke.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "database unreachable: " + e.Err.Error() }

// Unwrap returns the dial error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err says the database could not be reached:
// a connection it refused (UnreachableError), one the driver found broken
// and dropped, or a PostgreSQL server shutting down (admin_shutdown,
// crash_shutdown). Callers answer "unavailable, try again", not a server
// error.
func IsUnreachable(err error) bool {
	var ue *UnreachableError
	if err == nil {
		return false
	}
	switch pgCode(err) {
	case "57P01", "57P02":
		return true
	}
	return errors.As(err, &ue) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn)
}
