package master

import (
	"context"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// retention is the leader's hourly duty that deletes runs older than the
// retention setting, in bounded batches, and the run grants no report can
// use any more.
type retention struct {
	db  bun.IDB
	log *slog.Logger
	// leads says whether this master leads now: the leader prunes for the cluster.
	leads func() bool
	// days is the retention setting in force (0: keep runs forever).
	days func() int
}

// purgeBatch is how many runs one delete removes: the database is never
// locked for long.
const purgeBatch = 1000

// pass runs one round of the duty.
func (r *retention) pass(ctx context.Context) {
	if !r.leads() {
		return
	}
	// Run grants matter only while a run sent to a node may still be reported.
	if n, err := store.DeleteRunGrantsBefore(ctx, r.db, time.Now().Add(-runGrantTTL)); err != nil {
		r.log.Error("run grants: prune", "err", err)
	} else if n > 0 {
		r.log.Info("run grants: old grants pruned", "grants", n)
	}
	days := r.days()
	if days <= 0 {
		return
	}
	n, err := r.purge(ctx, time.Now().AddDate(0, 0, -days))
	if err != nil {
		r.log.Error("run retention", "err", err)
	} else if n > 0 {
		r.log.Info("run retention: old runs deleted", "runs", n, "older_than_days", days)
	}
}

// purge deletes runs that started before cutoff, purgeBatch at a time.
func (r *retention) purge(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		n, err := store.DeleteRunsBefore(ctx, r.db, cutoff, purgeBatch)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}
