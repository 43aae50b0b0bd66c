package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// TaskSpecs returns the stored spec (JSON definition) of each task of ids
// that exists, by id.
func TaskSpecs(ctx context.Context, db bun.IDB, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID   string `bun:"id"`
		Spec string `bun:"spec"`
	}
	if err := db.NewSelect().TableExpr("tasks").Column("id", "spec").Where("id IN (?)", bun.In(ids)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: load task specs: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r.Spec
	}
	return out, nil
}

// TaskSpecsWithKey returns the spec of each task that is not deleted and
// whose spec may hold key as its "key" field, by id: a prefilter the caller
// confirms by decoding (a param named "key" matches too).
// Keys are unique per project: only tasks of project are looked at.
func TaskSpecsWithKey(ctx context.Context, db bun.IDB, project int64, key string) (map[string]string, error) {
	var rows []struct {
		ID   string `bun:"id"`
		Spec string `bun:"spec"`
	}
	pattern := `%"key":"` + escapeLikeBang(key) + `"%`
	if err := db.NewSelect().TableExpr("tasks").Column("id", "spec").Where("status <> ?", TaskDeleted).Where("project_id = ?", project).
		Where("spec LIKE ? ESCAPE '!'", pattern).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: tasks with key: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Spec
	}
	return out, nil
}
