// Worker pools: the labels of nodes, the running workers a selector is
// matched against, pools an admin approved, and pruning of vanished members.

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// RunningWorkers returns the running, approved workers, by name: the nodes
// whose labels a selector is matched against at fire time.
func RunningWorkers(ctx context.Context, db bun.IDB) ([]Node, error) {
	var nodes []Node
	err := db.NewSelect().Model(&nodes).Where("type = ?", TypeWorker).Where("status = ?", StatusRunning).
		Where("mode <> ?", ModePending).OrderExpr("name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: running workers: %w", err)
	}
	return nodes, nil
}

// SetNodeLabels replaces the labels a worker declares (a JSON object) and
// reports whether they changed: a heartbeat that repeats them writes nothing.
func SetNodeLabels(ctx context.Context, db bun.IDB, name, labels, approved string) (changed bool, err error) {
	res, err := db.NewUpdate().Model((*Node)(nil)).Set("labels = ?", labels).Set("approved_labels = ?", nullIfEmpty(approved)).
		Where("name = ?", name).Where("type = ?", TypeWorker).Where("labels <> ?", labels).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("store: set labels of node %q: %w", name, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SetNodeAdminLabels replaces the labels an admin set on a worker (a JSON
// object). A master node or an unknown name gives ErrNotFound.
func SetNodeAdminLabels(ctx context.Context, db bun.IDB, name, labels string) error {
	res, err := db.NewUpdate().Model((*Node)(nil)).Set("admin_labels = ?", labels).
		Set("updated_at = ?", time.Now().UTC()).
		Where("name = ?", name).Where("type = ?", TypeWorker).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: node %q: %w", name, ErrNotFound)
		}
		return fmt.Errorf("store: set admin labels: %w", err)
	}
	return nil
}

// PoolApproval is a pool (one label, "key=value") an admin approved: new
// workers carrying it join without per-node approval.
type PoolApproval struct {
	bun.BaseModel `bun:"table:pool_approvals"`

	Label     string    `bun:"label,pk"`
	CreatedBy string    `bun:"created_by"`
	CreatedAt time.Time `bun:"created_at"`
}

// ApprovePool records an approval; approving a pool twice is no error.
func ApprovePool(ctx context.Context, db bun.IDB, label, by string) error {
	p := &PoolApproval{Label: label, CreatedBy: by, CreatedAt: time.Now().UTC()}
	err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
		_, err := db.NewInsert().Model(p).Exec(ctx)
		return err
	})
	if err != nil {
		if isDuplicate(err) {
			return nil
		}
		return fmt.Errorf("store: approve pool %q: %w", label, err)
	}
	return nil
}

// RevokePoolApproval removes an approval; ErrNotFound when there was none.
func RevokePoolApproval(ctx context.Context, db bun.IDB, label string) error {
	res, err := db.NewDelete().Model((*PoolApproval)(nil)).Where("label = ?", label).Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: pool approval %q: %w", label, ErrNotFound)
		}
		return fmt.Errorf("store: revoke pool approval: %w", err)
	}
	return nil
}

// ListPoolApprovals returns every approved pool, by label.
func ListPoolApprovals(ctx context.Context, db bun.IDB) ([]PoolApproval, error) {
	var out []PoolApproval
	if err := db.NewSelect().Model(&out).OrderExpr("label ASC").Limit(1000).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: pool approvals: %w", err)
	}
	return out, nil
}

// PoolApprovedAmong returns the first of labels ("key=value") an admin
// approved as a pool, or "".
func PoolApprovedAmong(ctx context.Context, db bun.IDB, labels []string) (string, error) {
	if len(labels) == 0 {
		return "", nil
	}
	var found []string
	err := db.NewSelect().Model((*PoolApproval)(nil)).Column("label").Where("label IN (?)", bun.In(labels)).
		OrderExpr("label ASC").Limit(1).Scan(ctx, &found)
	if err != nil {
		return "", fmt.Errorf("store: pool approvals: %w", err)
	}
	if len(found) == 0 {
		return "", nil
	}
	return found[0], nil
}

// PruneOfflineWorkers deletes the auto-registered workers that have been
// offline since before cutoff (their last contact), with their fire claims
// and executor entries, and returns their names: an autoscaled fleet leaves
// no dead rows behind. At most limit are pruned per call. Manual nodes,
// which an admin added, are kept.
func PruneOfflineWorkers(ctx context.Context, db bun.IDB, cutoff time.Time, limit int) ([]string, error) {
	var names []string
	err := db.NewSelect().Model((*Node)(nil)).Column("name").
		Where("type = ?", TypeWorker).Where("mode = ?", ModeAuto).Where("status = ?", StatusOffline).
		Where("updated_at < ?", cutoff.UTC()).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("last_seen IS NULL").WhereOr("last_seen < ?", cutoff.UTC())
		}).
		OrderExpr("name ASC").Limit(int64(limit)).Scan(ctx, &names)
	if err != nil {
		return nil, fmt.Errorf("store: offline workers: %w", err)
	}
	var out []string
	for _, name := range names {
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			res, err := tx.NewDelete().Model((*Node)(nil)).Where("name = ?", name).
				Where("status = ?", StatusOffline).Where("mode = ?", ModeAuto).
				Where("updated_at < ?", cutoff.UTC()).Exec(ctx)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return nil // it came back meanwhile
			}
			out = append(out, name)
			if err := ReleaseClaims(ctx, tx, name); err != nil {
				return err
			}
			return RemoveNodeFromTasks(ctx, tx, name)
		})
		if err != nil {
			return out, fmt.Errorf("store: prune offline worker %q: %w", name, err)
		}
	}
	return out, nil
}

// SelectorTask is a task with a selector, as membership sync reads it.
type SelectorTask struct {
	ID       string     `bun:"id"`
	Selector string     `bun:"selector"`
	Status   TaskStatus `bun:"status"`
}

// SelectorTasks returns the tasks (not deleted) that have a selector, by id.
// projects limits them (nil: every project).
func SelectorTasks(ctx context.Context, db bun.IDB, projects []int64) ([]SelectorTask, error) {
	var out []SelectorTask
	err := inProjects(db.NewSelect().Model((*Task)(nil)).Column("id", "selector", "status").
		Where("selector <> ''").Where("status <> ?", TaskDeleted), "project_id", projects).OrderExpr("id ASC").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("store: tasks with a selector: %w", err)
	}
	return out, nil
}

// Workers returns every approved worker (any status), by name: the nodes a
// selector may select.
func Workers(ctx context.Context, db bun.IDB) ([]Node, error) {
	var nodes []Node
	err := db.NewSelect().Model(&nodes).Where("type = ?", TypeWorker).Where("mode <> ?", ModePending).
		OrderExpr("name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: workers: %w", err)
	}
	return nodes, nil
}

// Membership is one (task, node) pair a selector selects.
type Membership struct {
	TaskID string
	Node   string
}

// SelectedMemberships returns every selected (task, node) pair.
func SelectedMemberships(ctx context.Context, db bun.IDB) ([]Membership, error) {
	var rows []TaskExecutor
	if err := db.NewSelect().Model(&rows).Where("selected = ?", true).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: selected members: %w", err)
	}
	out := make([]Membership, len(rows))
	for i, r := range rows {
		out[i] = Membership{TaskID: r.TaskID, Node: r.Node}
	}
	return out, nil
}

// AddSelected records that a task's selector selects node, unless the task
// names it already; it reports whether a row was added.
func AddSelected(ctx context.Context, db bun.IDB, taskID, node string) (bool, error) {
	res, err := db.NewInsert().Model(&TaskExecutor{TaskID: taskID, Node: node, Selected: true}).Ignore().Exec(ctx)
	if err != nil {
		if isDuplicate(err) {
			return false, nil
		}
		return false, fmt.Errorf("store: add selected member: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RemoveSelected drops a selected (never a named) membership and reports
// whether there was one.
func RemoveSelected(ctx context.Context, db bun.IDB, taskID, node string) (bool, error) {
	res, err := db.NewDelete().Model((*TaskExecutor)(nil)).Where("task_id = ?", taskID).Where("node = ?", node).
		Where("selected = ?", true).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("store: remove selected member: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SelectedTasksOf returns the ids of the tasks whose selector selects node.
func SelectedTasksOf(ctx context.Context, db bun.IDB, node string) ([]string, error) {
	var ids []string
	err := db.NewSelect().Model((*TaskExecutor)(nil)).Column("task_id").Where("node = ?", node).
		Where("selected = ?", true).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: tasks selecting %q: %w", node, err)
	}
	return ids, nil
}

// SelectedMembersOf returns the nodes a task's selector selects.
func SelectedMembersOf(ctx context.Context, db bun.IDB, taskID string) ([]string, error) {
	var nodes []string
	err := db.NewSelect().Model((*TaskExecutor)(nil)).Column("node").Where("task_id = ?", taskID).
		Where("selected = ?", true).Scan(ctx, &nodes)
	if err != nil {
		return nil, fmt.Errorf("store: selected members of %s: %w", taskID, err)
	}
	return nodes, nil
}

// NodeRunCounts are a node's runs and failed runs over a window.
type NodeRunCounts struct {
	Runs   int
	Failed int
}

// RunCountsByNodeSince counts each node's runs started since a time, and
// those that failed (failed or timed out), for the Pools view: only the
// runs of these projects (nil: all), so no one counts another project's.
func RunCountsByNodeSince(ctx context.Context, db bun.IDB, since time.Time, projects []int64) (map[string]NodeRunCounts, error) {
	var rows []struct {
		Node   string `bun:"node"`
		N      int    `bun:"n"`
		Failed int    `bun:"failed"`
	}
	q := db.NewSelect().Model((*Run)(nil)).Column("node").ColumnExpr("COUNT(*) AS n").
		ColumnExpr("SUM(CASE WHEN result IN (?) THEN 1 ELSE 0 END) AS failed", bun.In([]string{ResultFailed, ResultTimeout})).
		Where("started_at >= ?", since.UTC())
	err := runsInProjects(q, "", projects).Group("node").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: run counts by node: %w", err)
	}
	out := make(map[string]NodeRunCounts, len(rows))
	for _, r := range rows {
		out[r.Node] = NodeRunCounts{Runs: r.N, Failed: r.Failed}
	}
	return out, nil
}
