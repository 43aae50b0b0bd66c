package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// ErrBatchRace means a batch of delayed tasks met a pending task created
// meanwhile with one of its keys: the caller creates them one by one.
var ErrBatchRace = errors.New("store: a delayed task of the batch was created meanwhile")

// CreateDelayedBatch inserts many delayed tasks as CreateDelayed inserts
// one, in few statements; run it in a transaction. out[i] is the task
// stored for ds[i]: ds[i] itself when created[i], else the pending task
// of the same key (created before, or earlier in ds). A pending task
// created meanwhile with one of the keys gives ErrBatchRace.
func CreateDelayedBatch(ctx context.Context, db bun.IDB, ds []*DelayedTask) (out []*DelayedTask, created []bool, err error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	keys := make([]string, len(ds))
	for i, d := range ds {
		if d.ProjectID == 0 {
			d.ProjectID = DefaultProjectID
		}
		keys[i] = DelayedPendingKey(d.ProjectID, d.SourceApp, d.Topic, d.ContentKey)
		d.PendingKey, d.Status = &keys[i], DelayedPending
		d.CreatedAt, d.UpdatedAt = now, now
		d.DueAt, d.NextAt = d.DueAt.UTC().Truncate(time.Microsecond), d.NextAt.UTC().Truncate(time.Microsecond)
		if d.Executors == "" {
			d.Executors = "[]"
		}
		if d.Keepers == "" {
			d.Keepers = "[]"
		}
	}
	existing := map[string]*DelayedTask{}
	for chunk := range slices.Chunk(slices.Compact(slices.Sorted(slices.Values(keys))), 500) {
		var rows []DelayedTask
		if err := db.NewSelect().Model(&rows).Where("pending_key IN (?)", bun.In(chunk)).Scan(ctx); err != nil {
			return nil, nil, fmt.Errorf("store: read pending delayed tasks: %w", err)
		}
		for i := range rows {
			existing[*rows[i].PendingKey] = &rows[i]
		}
	}
	out, created = make([]*DelayedTask, len(ds)), make([]bool, len(ds))
	var fresh []*DelayedTask
	for i, d := range ds {
		if e := existing[keys[i]]; e != nil {
			out[i] = e
			continue
		}
		existing[keys[i]] = d
		out[i], created[i] = d, true
		fresh = append(fresh, d)
	}
	for chunk := range slices.Chunk(fresh, 100) {
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			if isDuplicate(err) {
				return nil, nil, ErrBatchRace
			}
			return nil, nil, fmt.Errorf("store: create delayed tasks: %w", err)
		}
	}
	return out, created, nil
}
