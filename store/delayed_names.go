package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// DelayedName is how the console names a delayed task: its topic and
// content key, rather than its 32-character id.
type DelayedName struct {
	ID         string `bun:"id"`
	Topic      string `bun:"topic"`
	ContentKey string `bun:"content_key"`
}

// DelayedNamesIn maps delayed task ids to their names (unknown ids, and
// those outside projects, are left out). projects limits them (nil: every
// project).
func DelayedNamesIn(ctx context.Context, db bun.IDB, ids []string, projects []int64) (map[string]DelayedName, error) {
	out := map[string]DelayedName{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []DelayedName
	if err := inProjects(db.NewSelect().Table("delayed_tasks").Column("id", "topic", "content_key").Where("id IN (?)", bun.In(ids)),
		"project_id", projects).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("store: delayed names: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}
