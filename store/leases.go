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
}

// Fence makes a write conditional on the writer still holding a lease: a
// paused old leader whose lease was taken over (new epoch) or has expired
// changes nothing. It is one subquery on the lease row, no lock.
type Fence struct {
	Lease  string
	Holder string
	Epoch  int64
}

// where adds the fence's condition to an update.
func (f *Fence) where(q *bun.UpdateQuery) *bun.UpdateQuery {
	if f == nil {
		return q
	}
	return q.Where("EXISTS (SELECT 1 FROM leases WHERE name = ? AND holder = ? AND epoch = ? AND expires_at > ?)",
		f.Lease, f.Holder, f.Epoch, time.Now().UTC())
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
	q := db.NewUpdate().Model((*Node)(nil)).
		Set("status = ?", StatusOffline).Set("reason = ?", reason).Set("updated_at = ?", time.Now().UTC()).
		Where("name = ?", name).Where("type = ?", TypeMaster).Where("status <> ?", StatusOffline).
		Where("last_seen < ?", cutoff.UTC())
	res, err := fence.where(q).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: mark master %q stale: %w", name, ErrConflict)
		}
		return fmt.Errorf("store: mark master %q stale: %w", name, err)
	}
	return nil
}
