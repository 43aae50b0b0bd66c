package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// TaskVersion is one saved definition of a task, immutable once written.
type TaskVersion struct {
	bun.BaseModel `bun:"table:task_versions"`

	TaskID  string `bun:"task_id,pk"`
	Version int    `bun:"version,pk"`
	Title   string `bun:"title"`
	// Definition is the engine's JSON of the task's definition, secrets
	// included (a restore brings them back); never shown as it is.
	Definition string    `bun:"definition"`
	CreatedAt  time.Time `bun:"created_at"`
	// CreatedBy is the user, or user and token, who saved it.
	CreatedBy string `bun:"created_by"`
	// Via is where the save came from: console, api, apply, bulk, restore.
	Via  string `bun:"via"`
	Note string `bun:"note"`
}

// AddTaskVersions inserts versions; run it in the transaction that saves
// their tasks.
func AddTaskVersions(ctx context.Context, db bun.IDB, vs []TaskVersion) error {
	now := time.Now().UTC()
	for i := range vs {
		if vs[i].CreatedAt.IsZero() {
			vs[i].CreatedAt = now
		}
	}
	for start := 0; start < len(vs); start += 200 {
		chunk := vs[start:min(start+200, len(vs))]
		if _, err := db.NewInsert().Model(&chunk).Exec(ctx); err != nil {
			return fmt.Errorf("store: add task versions: %w", err)
		}
	}
	return nil
}

// TaskVersions lists a task's versions older than before (all when 0),
// newest first, at most limit.
func TaskVersions(ctx context.Context, db bun.IDB, taskID string, before, limit int) ([]TaskVersion, error) {
	var out []TaskVersion
	q := db.NewSelect().Model(&out).Where("task_id = ?", taskID)
	if before > 0 {
		q = q.Where("version < ?", before)
	}
	if err := q.OrderExpr("version DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: task versions: %w", err)
	}
	return out, nil
}

// GetTaskVersion reads one version of a task.
func GetTaskVersion(ctx context.Context, db bun.IDB, taskID string, version int) (*TaskVersion, error) {
	v := new(TaskVersion)
	if err := db.NewSelect().Model(v).Where("task_id = ?", taskID).Where("version = ?", version).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: task version: %w", notFound(err))
	}
	return v, nil
}

// PruneTaskVersions deletes a task's versions older than its newest keep,
// but never those in keepAlso (the versions recent runs used).
func PruneTaskVersions(ctx context.Context, db bun.IDB, taskID string, keep int, keepAlso []int) (int, error) {
	var cut []int
	if err := db.NewSelect().Model((*TaskVersion)(nil)).Column("version").Where("task_id = ?", taskID).
		OrderExpr("version DESC").Offset(int64(keep)).Limit(1).Scan(ctx, &cut); err != nil {
		return 0, fmt.Errorf("store: prune task versions: %w", err)
	}
	if len(cut) == 0 {
		return 0, nil
	}
	q := db.NewDelete().Model((*TaskVersion)(nil)).Where("task_id = ?", taskID).Where("version <= ?", cut[0])
	if len(keepAlso) > 0 {
		q = q.Where("version NOT IN (?)", bun.In(keepAlso))
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: prune task versions: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// DeleteTaskVersion deletes one version (of an edit undone).
func DeleteTaskVersion(ctx context.Context, db bun.IDB, taskID string, version int) error {
	if _, err := db.NewDelete().Model((*TaskVersion)(nil)).Where("task_id = ?", taskID).Where("version = ?", version).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete task version: %w", err)
	}
	return nil
}

// RecentRunVersions returns the task versions (not 0) that the task's
// latest n runs ran, by start time: the versions pruning keeps.
func RecentRunVersions(ctx context.Context, db bun.IDB, taskID string, n int) ([]int, error) {
	latest := db.NewSelect().Model((*Run)(nil)).Column("task_version").Where("task_id = ?", taskID).
		OrderExpr("started_at DESC").Limit(int64(n))
	var out []int
	if err := db.NewSelect().TableExpr("(?) AS r", latest).ColumnExpr("DISTINCT r.task_version").
		Where("r.task_version > 0").Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("store: versions of recent runs: %w", err)
	}
	return out, nil
}
