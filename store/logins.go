package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// LoginFailure counts the failed logins of one throttle key in a fixed
// window, shared by every master so the throttle holds across them.
type LoginFailure struct {
	bun.BaseModel `bun:"table:login_failures"`

	Key          string    `bun:"k,pk"`
	Failures     int       `bun:"failures"`
	WindowStart  time.Time `bun:"window_start"`
	BlockedUntil time.Time `bun:"blocked_until,nullzero"`
}

// MaxLoginFailureKey is the longest throttle key the table holds.
const MaxLoginFailureKey = 128

// loginFailureRetries bounds the optimistic retries of RecordLoginFailure
// when other masters update the same key at the same moment.
const loginFailureRetries = 8

// LoginBlockedUntil returns the latest time until which any of keys is
// blocked, or the zero time when none is blocked at now.
func LoginBlockedUntil(ctx context.Context, db bun.IDB, keys []string, now time.Time) (time.Time, error) {
	var rows []LoginFailure
	if len(keys) == 0 {
		return time.Time{}, nil
	}
	err := db.NewSelect().Model(&rows).Where("k IN (?)", bun.In(keys)).
		Where("blocked_until > ?", now.UTC()).Scan(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: login failures: %w", err)
	}
	var until time.Time
	for _, r := range rows {
		if r.BlockedUntil.After(until) {
			until = r.BlockedUntil.UTC()
		}
	}
	return until, nil
}

// RecordLoginFailure counts one failed login of key. The limit-th failure
// inside a window blocks the key until the window ends; a failure after the
// window starts a new one. Every write is conditional on the row read just
// before (no locks held, so Galera and TiDB behave), retried when another
// master changed it in between.
func RecordLoginFailure(ctx context.Context, db bun.IDB, key string, limit int, window time.Duration, now time.Time) error {
	// Microseconds: what DATETIME(6) keeps, so the row read back compares equal.
	now = now.UTC().Truncate(time.Microsecond)
	fresh := func() *LoginFailure {
		r := &LoginFailure{Key: key, Failures: 1, WindowStart: now}
		if limit <= 1 {
			r.BlockedUntil = now.Add(window)
		}
		return r
	}
	for range loginFailureRetries {
		cur := new(LoginFailure)
		err := db.NewSelect().Model(cur).Where("k = ?", key).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
				_, err := db.NewInsert().Model(fresh()).Exec(ctx)
				return err
			})
			if err == nil {
				return nil
			} else if !isDuplicate(err) {
				return fmt.Errorf("store: record login failure: %w", err)
			}
			continue // another master inserted it first: count on its row
		}
		if err != nil {
			return fmt.Errorf("store: read login failures: %w", err)
		}
		next := fresh()
		if end := cur.WindowStart.Add(window); end.After(now) {
			next.Failures, next.WindowStart, next.BlockedUntil = cur.Failures+1, cur.WindowStart, cur.BlockedUntil
			if next.Failures >= limit {
				next.BlockedUntil = end
			}
		}
		res, err := db.NewUpdate().Model(next).Column("failures", "window_start", "blocked_until").
			Where("k = ?", key).Where("failures = ?", cur.Failures).Where("window_start = ?", cur.WindowStart.UTC()).Exec(ctx)
		if err != nil {
			return fmt.Errorf("store: record login failure: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
	}
	return fmt.Errorf("store: record login failure: %w", ErrConflict)
}

// ClearLoginFailures forgets the failures of key (a successful login).
func ClearLoginFailures(ctx context.Context, db bun.IDB, key string) error {
	if _, err := db.NewDelete().Model((*LoginFailure)(nil)).Where("k = ?", key).Exec(ctx); err != nil {
		return fmt.Errorf("store: clear login failures: %w", err)
	}
	return nil
}

// PruneLoginFailures deletes the keys whose window started before cutoff
// and that are not blocked at now, and returns how many it deleted.
func PruneLoginFailures(ctx context.Context, db bun.IDB, cutoff, now time.Time) (int, error) {
	res, err := db.NewDelete().Model((*LoginFailure)(nil)).Where("window_start < ?", cutoff.UTC()).
		WhereGroup(" AND ", func(q *bun.DeleteQuery) *bun.DeleteQuery {
			return q.Where("blocked_until IS NULL").WhereOr("blocked_until <= ?", now.UTC())
		}).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: prune login failures: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// loginReserveRetries bounds the optimistic retries of ReserveLoginAttempt
// when other requests change the same key at the same moment.
const loginReserveRetries = 32

// ReserveLoginAttempt counts one attempt of key in its current window, before
// its password is checked, unless the window already holds limit attempts:
// then it returns ok false and when the window ends. The count is one
// conditional UPDATE (failures < limit), so concurrent requests on any number
// of masters never pass more than limit. windowStart names the window the
// attempt was counted in, for ReleaseLoginAttempt.
func ReserveLoginAttempt(ctx context.Context, db bun.IDB, key string, limit int, window time.Duration, now time.Time) (ok bool, until, windowStart time.Time, err error) {
	now = now.UTC().Truncate(time.Microsecond)
	for range loginReserveRetries {
		cur := new(LoginFailure)
		err := db.NewSelect().Model(cur).Where("k = ?", key).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
				_, err := db.NewInsert().Model(&LoginFailure{Key: key, Failures: 1, WindowStart: now}).Exec(ctx)
				return err
			})
			if err == nil {
				return true, time.Time{}, now, nil
			}
			if !isDuplicate(err) && !IsRetryable(err) {
				return false, time.Time{}, time.Time{}, fmt.Errorf("store: reserve login attempt: %w", err)
			}
			continue // another request inserted it first: count on its row
		}
		if err != nil {
			return false, time.Time{}, time.Time{}, fmt.Errorf("store: read login attempts: %w", err)
		}
		start := cur.WindowStart.UTC()
		var res sql.Result
		if end := start.Add(window); !end.After(now) {
			// The window is over: start a new one, unless someone else just did.
			res, err = db.NewUpdate().Model((*LoginFailure)(nil)).Set("failures = 1").Set("window_start = ?", now).
				Set("blocked_until = NULL").Where("k = ?", key).Where("window_start = ?", start).Exec(ctx)
			start = now
		} else {
			if cur.Failures >= limit {
				return false, end, start, nil
			}
			res, err = db.NewUpdate().Model((*LoginFailure)(nil)).Set("failures = failures + 1").
				Where("k = ?", key).Where("window_start = ?", start).Where("failures < ?", limit).Exec(ctx)
		}
		if err != nil {
			if IsRetryable(err) {
				continue
			}
			return false, time.Time{}, time.Time{}, fmt.Errorf("store: reserve login attempt: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return true, time.Time{}, start, nil
		}
	}
	return false, time.Time{}, time.Time{}, fmt.Errorf("store: reserve login attempt: %w", ErrConflict)
}

// ReleaseLoginAttempt gives back one attempt of key counted in the window
// that started at windowStart (a login that succeeded). A window that has
// moved on meanwhile is left alone.
func ReleaseLoginAttempt(ctx context.Context, db bun.IDB, key string, windowStart time.Time) error {
	_, err := db.NewUpdate().Model((*LoginFailure)(nil)).Set("failures = failures - 1").
		Where("k = ?", key).Where("window_start = ?", windowStart.UTC()).Where("failures > 0").Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: release login attempt: %w", err)
	}
	return nil
}
