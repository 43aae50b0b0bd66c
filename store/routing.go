package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// LastRouted names the node a task was last sent to, by a fire claim or a
// run grant (run once, child runs), whichever is newer; "" when neither is
// kept. Round-robin run once rotates past it, so manual runs take turns too.
func LastRouted(ctx context.Context, db bun.IDB, taskID string) (string, error) {
	type row struct {
		Node      string    `bun:"node"`
		CreatedAt time.Time `bun:"created_at"`
	}
	var claims, grants []row
	err := db.NewSelect().Model((*Claim)(nil)).Column("node", "created_at").Where("task_id = ?", taskID).
		OrderExpr("created_at DESC, fire_at DESC").Limit(1).Scan(ctx, &claims)
	if err != nil {
		return "", fmt.Errorf("store: last claim of task %s: %w", taskID, err)
	}
	err = db.NewSelect().Model((*RunGrant)(nil)).Column("node", "created_at").Where("task_id = ?", taskID).
		OrderExpr("created_at DESC").Limit(1).Scan(ctx, &grants)
	if err != nil {
		return "", fmt.Errorf("store: last run grant of task %s: %w", taskID, err)
	}
	switch {
	case len(claims) == 0 && len(grants) == 0:
		return "", nil
	case len(grants) == 0:
		return claims[0].Node, nil
	case len(claims) == 0 || grants[0].CreatedAt.After(claims[0].CreatedAt):
		return grants[0].Node, nil
	}
	return claims[0].Node, nil
}

// ActiveTasksWithSpec returns the ids of the running and paused tasks whose
// stored definition contains fragment (a pre-filter such as
// `"routing":"broadcast"`: the caller decodes and checks), by id.
func ActiveTasksWithSpec(ctx context.Context, db bun.IDB, fragment string) ([]string, error) {
	var ids []string
	err := db.NewSelect().Model((*Task)(nil)).Column("id").
		Where("status IN (?)", bun.In([]TaskStatus{TaskRunning, TaskPaused})).
		Where("spec LIKE ? ESCAPE '!'", "%"+escapeLikeBang(fragment)+"%").
		OrderExpr("id ASC").Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: active tasks by definition: %w", err)
	}
	return ids, nil
}
