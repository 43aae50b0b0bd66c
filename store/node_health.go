package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// HealthSample is one health probe of a node, as the leader recorded it.
type HealthSample struct {
	bun.BaseModel `bun:"table:node_health"`

	ID        int64     `bun:"id,pk,autoincrement"`
	Node      string    `bun:"node"`
	At        time.Time `bun:"at"`
	LatencyMS int64     `bun:"latency_ms"`
	OK        bool      `bun:"ok"`
	// Reason is why the probe failed ("" when OK), at most MaxHealthReason bytes.
	Reason string `bun:"reason"`
}

// MaxHealthReason bounds a stored probe failure reason (the column's size).
const MaxHealthReason = 255

// InsertHealthSamples stores samples with one multi-row insert per 500.
func InsertHealthSamples(ctx context.Context, db bun.IDB, samples []HealthSample) error {
	const chunk = 500
	for len(samples) > 0 {
		part := samples[:min(chunk, len(samples))]
		samples = samples[len(part):]
		for i := range part {
			part[i].At = part[i].At.UTC()
		}
		if _, err := db.NewInsert().Model(&part).Exec(ctx); err != nil {
			return fmt.Errorf("store: insert health samples: %w", err)
		}
	}
	return nil
}

// NodeHealth returns a node's samples taken at or after since, oldest first:
// the newest limit of them.
func NodeHealth(ctx context.Context, db bun.IDB, node string, since time.Time, limit int) ([]HealthSample, error) {
	out := []HealthSample{}
	err := db.NewSelect().Model(&out).Where("node = ?", node).Where("at >= ?", since.UTC()).
		OrderExpr("at DESC, id DESC").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: node health of %s: %w", node, err)
	}
	slices.Reverse(out)
	return out, nil
}

// DeleteHealthBefore deletes up to limit samples taken before cutoff and
// returns how many it deleted (ids first: MySQL refuses LIMIT in an IN
// subquery and SQLite lacks DELETE … LIMIT).
func DeleteHealthBefore(ctx context.Context, db bun.IDB, cutoff time.Time, limit int) (int, error) {
	var ids []int64
	err := db.NewSelect().Model((*HealthSample)(nil)).Column("id").Where("at < ?", cutoff.UTC()).
		OrderExpr("at ASC").Limit(int64(limit)).Scan(ctx, &ids)
	if err != nil {
		return 0, fmt.Errorf("store: find old health samples: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := db.NewDelete().Model((*HealthSample)(nil)).Where("id IN (?)", bun.In(ids)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: delete old health samples: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// CountNodesByTypeStatus returns how many nodes of each type (master,
// worker) have each status, in one grouped query.
func CountNodesByTypeStatus(ctx context.Context, db bun.IDB) (map[string]map[NodeStatus]int, error) {
	var rows []struct {
		Type   string     `bun:"type"`
		Status NodeStatus `bun:"status"`
		N      int        `bun:"n"`
	}
	err := db.NewSelect().Table("nodes").Column("type", "status").ColumnExpr("COUNT(*) AS n").
		Group("type", "status").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: count nodes by type and status: %w", err)
	}
	out := map[string]map[NodeStatus]int{}
	for _, r := range rows {
		if out[r.Type] == nil {
			out[r.Type] = map[NodeStatus]int{}
		}
		out[r.Type][r.Status] = r.N
	}
	return out, nil
}
