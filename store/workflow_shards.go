package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// BroadcastNode is the node of a broadcast step: its runs are its shards'.
const BroadcastNode = "*"

// WorkflowShard is one run of a broadcast step: the step runs on every
// running executor of its task, each run recorded as a shard, and ends once
// every shard has.
type WorkflowShard struct {
	bun.BaseModel `bun:"table:workflow_shards"`

	RunID      string    `bun:"run_id,pk"`
	Step       string    `bun:"step,pk"`
	Node       string    `bun:"node,pk"`
	State      string    `bun:"state"`
	DispatchID string    `bun:"dispatch_id"`
	TaskRun    string    `bun:"task_run"`
	Attempt    int       `bun:"attempt"`
	Output     string    `bun:"output"`
	StartedAt  time.Time `bun:"started_at,nullzero"`
	EndedAt    time.Time `bun:"ended_at,nullzero"`
	UpdatedAt  time.Time `bun:"updated_at"`
}

// DispatchBroadcast moves a pending broadcast step to dispatched with one
// shard per node (dispatched, each with the id its run will have); false
// when another master dispatched or skipped it first. Run it in a
// transaction.
func DispatchBroadcast(ctx context.Context, db bun.IDB, runID, step string, shards []WorkflowShard) (bool, error) {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*WorkflowStep)(nil)).
		Set("state = ?", StepDispatched).Set("dispatch_id = ?", shards[0].DispatchID).Set("task_run = ''").
		Set("node = ?", BroadcastNode).Set("started_at = ?", now).Set("updated_at = ?", now).
		Where("run_id = ?", runID).Where("name = ?", step).Where("state = ?", StepPending).Exec(ctx)
	if ok, err := changed(res, err, "dispatch broadcast step"); !ok || err != nil {
		return ok, err
	}
	for i := range shards {
		shards[i].RunID, shards[i].Step, shards[i].State = runID, step, StepDispatched
		shards[i].StartedAt, shards[i].UpdatedAt = now, now
	}
	if _, err := db.NewInsert().Model(&shards).Exec(ctx); err != nil {
		return false, fmt.Errorf("store: create shards: %w", err)
	}
	return true, nil
}

// SetShard moves a shard from one of the states in from to sh.State, with
// its run's id and attempt when given and, once ended, its output; false
// when it was in none of them (or there is no such shard).
func SetShard(ctx context.Context, db bun.IDB, sh *WorkflowShard, from ...string) (bool, error) {
	sh.UpdatedAt = time.Now().UTC()
	cols := []string{"state", "updated_at"}
	if sh.TaskRun != "" {
		cols = append(cols, "task_run", "attempt")
	}
	if StepEnded(sh.State) {
		cols = append(cols, "output", "ended_at")
		if sh.EndedAt.IsZero() {
			sh.EndedAt = sh.UpdatedAt
		}
	}
	res, err := db.NewUpdate().Model(sh).Column(cols...).WherePK().Where("state IN (?)", bun.In(from)).Exec(ctx)
	return changed(res, err, "set shard")
}

// ShardsOf lists the shards of a workflow run's steps (of one step when
// step is given), by step and node.
func ShardsOf(ctx context.Context, db bun.IDB, runID, step string) ([]WorkflowShard, error) {
	var out []WorkflowShard
	q := db.NewSelect().Model(&out).Where("run_id = ?", runID).OrderExpr("step, node")
	if step != "" {
		q = q.Where("step = ?", step)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: shards of %s: %w", runID, err)
	}
	return out, nil
}

// LatestShardRun is the latest run (last attempt) of a shard, ErrNotFound
// when it has none yet.
func LatestShardRun(ctx context.Context, db bun.IDB, runID, step, node string) (*Run, error) {
	r := new(Run)
	if err := db.NewSelect().Model(r).Where("workflow_run = ?", runID).Where("workflow_step = ?", step).
		Where("node = ?", node).OrderExpr("attempt DESC, started_at DESC").Limit(1).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: run of shard %s/%s of %s: %w", step, node, runID, notFound(err))
	}
	return r, nil
}
