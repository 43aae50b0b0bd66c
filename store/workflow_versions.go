package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// WorkflowVersion is one saved definition of a workflow, immutable once
// written.
type WorkflowVersion struct {
	bun.BaseModel `bun:"table:workflow_versions"`

	WorkflowID string    `bun:"workflow_id,pk"`
	Version    int       `bun:"version,pk"`
	Title      string    `bun:"title"`
	Definition string    `bun:"definition"`
	CreatedAt  time.Time `bun:"created_at"`
	CreatedBy  string    `bun:"created_by"`
	// Via is where the save came from: console, api, apply, restore.
	Via  string `bun:"via"`
	Note string `bun:"note"`
}

// AddWorkflowVersion inserts a version; run it in the transaction that
// saves its workflow.
func AddWorkflowVersion(ctx context.Context, db bun.IDB, v *WorkflowVersion) error {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = time.Now().UTC()
	}
	if _, err := db.NewInsert().Model(v).Exec(ctx); err != nil {
		return fmt.Errorf("store: add workflow version: %w", err)
	}
	return nil
}

// WorkflowVersions lists a workflow's versions, newest first, at most
// limit, without their definitions.
func WorkflowVersions(ctx context.Context, db bun.IDB, id string, limit int) ([]WorkflowVersion, error) {
	var out []WorkflowVersion
	if err := db.NewSelect().Model(&out).ExcludeColumn("definition").Where("workflow_id = ?", id).
		OrderExpr("version DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: versions of workflow %s: %w", id, err)
	}
	return out, nil
}

// GetWorkflowVersion reads one version of a workflow.
func GetWorkflowVersion(ctx context.Context, db bun.IDB, id string, version int) (*WorkflowVersion, error) {
	v := new(WorkflowVersion)
	if err := db.NewSelect().Model(v).Where("workflow_id = ?", id).Where("version = ?", version).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: version %d of workflow %s: %w", version, id, notFound(err))
	}
	return v, nil
}

// PruneWorkflowVersions deletes a workflow's versions older than its keep
// newest (current is its version now).
func PruneWorkflowVersions(ctx context.Context, db bun.IDB, id string, current, keep int) error {
	if _, err := db.NewDelete().Model((*WorkflowVersion)(nil)).Where("workflow_id = ?", id).
		Where("version <= ?", current-keep).Exec(ctx); err != nil {
		return fmt.Errorf("store: prune versions of workflow %s: %w", id, err)
	}
	return nil
}
