package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// ClusterLease names the lease row whose holder is the leader of the masters.
const ClusterLease = "cluster"

// Lease is a row of table leases: who holds a duty, under which epoch, until when.
type Lease struct {
	bun.BaseModel `bun:"table:leases"`

	Name      string    `bun:"name,pk"`
	Holder    string    `bun:"holder"`
	Epoch     int64     `bun:"epoch"`
	ExpiresAt time.Time `bun:"expires_at"`
	UpdatedAt time.Time `bun:"updated_at"`
	// FenceSeq counts the fenced writes made under the lease (see Fence).
	FenceSeq int64 `bun:"fence_seq"`
}

// Fence makes a write conditional on the writer still holding a lease: a
// paused old leader whose lease was taken over (new epoch) or has expired
// changes nothing.
//
// The check is a write, not a read: the fenced write's transaction first
// adds one to the lease row's fence_seq where holder, epoch and expiry still
// match, and goes on only when that changed exactly one row. A read of the
// lease row could be satisfied by a stale version (a Galera node that lags,
// with wsrep_sync_wait=0, or a transaction's snapshot taken before a
// takeover) and Galera certifies only the rows a transaction writes. The
// write puts the lease row in the transaction's write set instead: InnoDB
// locks it, so a takeover under way waits for the fenced transaction (or it
// for the takeover, and then sees the new epoch); Galera certifies it, so a
// takeover committed on another node and the fenced write cannot both
// commit; SQLite has one writer at a time. The lease row is locked until the
// transaction ends, so the leader's fenced transactions queue on it (they
// are short).
type Fence struct {
	Lease  string
	Holder string
	Epoch  int64
}

// hold is the fence's write: it claims the lease row for the transaction
// of db, or gives ErrLeaseLost when the lease is no longer held under the
// fence (another holder, another epoch, or expired).
func (f *Fence) hold(ctx context.Context, db bun.IDB) error {
	res, err := db.NewUpdate().Model((*Lease)(nil)).Set("fence_seq = fence_seq + 1").
		Where("name = ?", f.Lease).Where("holder = ?", f.Holder).Where("epoch = ?", f.Epoch).
		Where("expires_at > ?", time.Now().UTC()).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: lease %q under epoch %d not held by %s: %w", f.Lease, f.Epoch, f.Holder, ErrLeaseLost)
		}
		return fmt.Errorf("store: fence on lease %q: %w", f.Lease, err)
	}
	return nil
}

// fenced runs write under fence f, the one way every fenced write is made:
// in one transaction, f's write on the lease row first (see Fence), then
// write; when f no longer holds, write does not run and the result is
// ErrLeaseLost (an ErrConflict). Without a fence write runs on db as it is.
// Inside a caller's transaction (db is a bun.Tx) both run in it, once: the
// caller commits. Otherwise fenced opens the transaction and runs it again
// after a retryable error (Retry), so write must be safe to run again: it
// starts from its arguments, not from what an earlier run left behind.
func fenced(ctx context.Context, db bun.IDB, f *Fence, write func(ctx context.Context, db bun.IDB) error) error {
	if f == nil {
		return write(ctx, db)
	}
	if isTx(db) {
		if err := f.hold(ctx, db); err != nil {
			return err
		}
		return write(ctx, db)
	}
	return RetryTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		if err := f.hold(ctx, tx); err != nil {
			return err
		}
		return write(ctx, tx)
	})
}

// fencedUpdate runs the update q under fence f (see fenced) and returns how
// many rows it changed.
func fencedUpdate(ctx context.Context, db bun.IDB, f *Fence, q *bun.UpdateQuery) (int64, error) {
	var n int64
	err := fenced(ctx, db, f, func(ctx context.Context, db bun.IDB) error {
		res, err := q.Conn(db).Exec(ctx)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// fencedAffected is fencedUpdate that wants q to change a row: ErrConflict
// when it changed none.
func fencedAffected(ctx context.Context, db bun.IDB, f *Fence, q *bun.UpdateQuery) error {
	n, err := fencedUpdate(ctx, db, f, q)
	if err == nil && n == 0 {
		return ErrConflict
	}
	return err
}

// GetLease returns the lease row called name or ErrNotFound.
func GetLease(ctx context.Context, db bun.IDB, name string) (*Lease, error) {
	l := new(Lease)
	if err := db.NewSelect().Model(l).Where("name = ?", name).Limit(1).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: get lease %q: %w", name, notFound(err))
	}
	return l, nil
}

// RenewLease extends the lease held by holder under epoch until now+ttl. A
// lease taken over meanwhile (other holder or epoch) gives ErrConflict; an
// expired one that nobody took is still renewed, its epoch unchanged.
func RenewLease(ctx context.Context, db bun.IDB, name, holder string, epoch int64, now time.Time, ttl time.Duration) error {
	res, err := db.NewUpdate().Model((*Lease)(nil)).
		Set("expires_at = ?", now.Add(ttl).UTC()).Set("updated_at = ?", now.UTC()).
		Where("name = ?", name).Where("holder = ?", holder).Where("epoch = ?", epoch).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: renew lease %q: %w", name, ErrConflict)
		}
		return fmt.Errorf("store: renew lease %q: %w", name, err)
	}
	return nil
}

// TakeLease makes holder the holder of the lease until now+ttl with the next
// epoch, when the lease seen with epoch seenEpoch has expired, or, with
// ownStale, when it is still held under holder's own name (a previous process
// of the same master that died without releasing it). Only one of several
// concurrent takers matches the row; the others get ErrConflict.
func TakeLease(ctx context.Context, db bun.IDB, name, holder string, seenEpoch int64, ownStale bool, now time.Time, ttl time.Duration) (epoch int64, err error) {
	q := db.NewUpdate().Model((*Lease)(nil)).
		Set("holder = ?", holder).Set("epoch = ?", seenEpoch+1).
		Set("expires_at = ?", now.Add(ttl).UTC()).Set("updated_at = ?", now.UTC()).
		Where("name = ?", name).Where("epoch = ?", seenEpoch)
	if ownStale {
		q = q.WhereGroup(" AND ", func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Where("expires_at <= ?", now.UTC()).WhereOr("holder = ?", holder)
		})
	} else {
		q = q.Where("expires_at <= ?", now.UTC())
	}
	res, err := q.Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return 0, fmt.Errorf("store: take lease %q: %w", name, ErrConflict)
		}
		return 0, fmt.Errorf("store: take lease %q: %w", name, err)
	}
	return seenEpoch + 1, nil
}

// ReleaseLease ends the lease now if holder still holds it under epoch, so
// another master takes it over at its next attempt instead of after expiry.
func ReleaseLease(ctx context.Context, db bun.IDB, name, holder string, epoch int64) error {
	past := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := db.NewUpdate().Model((*Lease)(nil)).
		Set("expires_at = ?", past).Set("updated_at = ?", time.Now().UTC()).
		Where("name = ?", name).Where("holder = ?", holder).Where("epoch = ?", epoch).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: release lease %q: %w", name, err)
	}
	return nil
}

// HeartbeatMaster records that the master process bootID, whose node is name,
// is alive: last seen now, running, no reason (a master the leader had marked
// stale comes back). Another process's row (a different boot id) is left
// alone and gives ErrConflict.
func HeartbeatMaster(ctx context.Context, db bun.IDB, name, bootID string, now time.Time) error {
	res, err := db.NewUpdate().Model((*Node)(nil)).
		Set("last_seen = ?", now.UTC()).Set("status = ?", StatusRunning).Set("desired_status = ?", StatusRunning).
		Set("failures = 0").Set("reason = ?", "").Set("updated_at = ?", now.UTC()).
		Where("name = ?", name).Where("type = ?", TypeMaster).Where("boot_id = ?", bootID).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: heartbeat of master %q: %w", name, ErrConflict)
		}
		return fmt.Errorf("store: heartbeat of master %q: %w", name, err)
	}
	return nil
}

// MarkMasterStale takes a master node offline with reason when its heartbeat
// is older than cutoff, under fence. A fresh heartbeat or a lost lease gives
// ErrConflict.
func MarkMasterStale(ctx context.Context, db bun.IDB, name string, cutoff time.Time, reason string, fence *Fence) error {
	err := fenced(ctx, db, fence, func(ctx context.Context, db bun.IDB) error {
		res, err := db.NewUpdate().Model((*Node)(nil)).
			Set("status = ?", StatusOffline).Set("reason = ?", reason).Set("updated_at = ?", time.Now().UTC()).
			Where("name = ?", name).Where("type = ?", TypeMaster).Where("status <> ?", StatusOffline).
			Where("last_seen < ?", cutoff.UTC()).Exec(ctx)
		return affected(res, err)
	})
	if err != nil {
		return fmt.Errorf("store: mark master %q stale: %w", name, err)
	}
	return nil
}
