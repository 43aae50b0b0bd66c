// What workers schedule: the spec pushed for a task and the tasks a node
// runs, pushed on Enable, registration and recovery; broadcast shards
// re-pushed when the running executors change.

package master

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// spec is what a worker receives for a task.
// A task with a selector always counts as shared (at least two): its
// members change while it runs, and a member that thought itself alone
// would run fires without claiming them.
func (t *Task) spec() protocol.TaskSpec {
	n := len(t.members())
	if t.Selector != "" {
		n = max(n, 2)
	}
	return protocol.TaskSpec{TaskDef: t.TaskDef, Paused: t.Status == store.TaskPaused, Executors: n, Version: t.Version, ProjectID: t.ProjectID}
}

// specFor is what node receives for a task. With broadcast routing it holds
// node's shard: its place, by name, among the task's running executors
// (running, node itself included), and their number, so each executor knows
// its slice of the work without asking anyone at fire time, and no slice
// belongs to an executor that is down.
func (t *Task) specFor(node string, running []string) protocol.TaskSpec {
	s := t.spec()
	if t.Routing == protocol.RoutingBroadcast {
		s.ShardIndex, s.ShardTotal = shardOf(node, running)
	}
	return s
}

// shardOf places node among the running names (node included), sorted.
func shardOf(node string, running []string) (index, total int) {
	names := slices.Sorted(slices.Values(running))
	names = slices.Compact(names)
	i, found := slices.BinarySearch(names, node)
	if !found {
		names = slices.Insert(names, i, node)
	}
	return i, len(names)
}

// runningNames returns the names of the running workers among names, sorted.
func (tk *Tasks) runningNames(ctx context.Context, names []string) ([]string, error) {
	nodes, err := store.RunningNodesNamed(ctx, tk.m.st.DB, names)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Type == store.TypeWorker {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// tasksFor returns the running and paused tasks a node executes, pushed on
// registration. The node counts as running in its broadcast shards: it is
// being told to run them.
func (tk *Tasks) tasksFor(ctx context.Context, node string) []protocol.TaskSpec {
	tk.m.pools.refreshMembers(ctx, node)
	rows, err := store.TasksOfNode(ctx, tk.m.st.DB, node)
	if err != nil {
		tk.m.log.Error("load tasks of node", "node", node, "err", err)
		return []protocol.TaskSpec{}
	}
	return tk.specsOf(ctx, node, rows)
}

// refreshMembers updates node's pool memberships before its tasks are
// pushed: its labels may have changed since the last push (a new process,
// an admin's edit).
func (pl *Pools) refreshMembers(ctx context.Context, node string) {
	if n, err := store.GetNode(ctx, pl.m.st.DB, node); err == nil {
		if _, err := syncNodeMembers(ctx, pl.m.st.DB, n); err != nil {
			pl.m.log.Error("pool membership of node", "node", node, "err", err)
		}
	}
}

// specsOf is what node receives for rows, tasks it executes; a task whose
// stored definition is bad is left out (and logged).
func (tk *Tasks) specsOf(ctx context.Context, node string, rows []store.Task) []protocol.TaskSpec {
	tasks := make([]*Task, 0, len(rows))
	var shared []string // executors of its broadcast tasks
	for i := range rows {
		t, err := decodeForPush(&rows[i])
		if err != nil {
			tk.m.log.Error("skip task with a bad stored definition", "task", rows[i].ID, "err", err)
			continue
		}
		tasks = append(tasks, t)
		if t.Routing == protocol.RoutingBroadcast {
			shared = append(shared, t.members()...)
		}
	}
	var running []string
	if len(shared) > 0 {
		var err error
		if running, err = tk.runningNames(ctx, dedupe(shared)); err != nil {
			tk.m.log.Error("load running executors of broadcast tasks", "node", node, "err", err)
		}
	}
	out := make([]protocol.TaskSpec, 0, len(tasks))
	for _, t := range tasks {
		mine := running
		if t.Routing == protocol.RoutingBroadcast {
			members := t.members()
			mine = slices.DeleteFunc(slices.Clone(running), func(n string) bool { return !slices.Contains(members, n) })
		}
		out = append(out, t.specFor(node, mine))
	}
	return out
}

// decodeForPush is decodeTask without what a push does not send (next fire
// time, keepers, children): a push decodes every task of a node.
func decodeForPush(r *store.Task) (*Task, error) {
	out := &Task{Executors: r.Executors, Selector: r.Selector, Selected: r.Selected, Status: r.Status, ProjectID: r.ProjectID}
	if err := json.Unmarshal([]byte(r.Spec), &out.TaskDef); err != nil {
		return nil, fmt.Errorf("master: task %s: stored definition: %w", r.ID, err)
	}
	out.ID = r.ID
	return out, nil
}

// shardState remembers, per broadcast task, the running executors this
// master last pushed shards for, so that a reshard pushes only changes.
type shardState struct {
	mu     sync.Mutex
	pushed map[string]string // task id -> sorted running executors, comma-joined
}

// reshard gives the running executors of every running or paused broadcast
// task their shard again when the set of running executors changed since
// this master last pushed it: SM_SHARD_TOTAL counts the executors that run,
// and the indexes close up when one goes offline or comes back. The leader
// runs it after every sweep; a master that changes a node's status runs it at
// once. A push that fails is retried at the next run.
func (tk *Tasks) reshard(ctx context.Context) {
	tk.m.shards.mu.Lock()
	defer tk.m.shards.mu.Unlock()
	ids, err := store.ActiveTasksWithSpec(ctx, tk.m.st.DB, `"routing":"`+protocol.RoutingBroadcast+`"`)
	if err != nil {
		tk.m.log.Error("reshard: load broadcast tasks", "err", err)
		return
	}
	if tk.m.shards.pushed == nil {
		tk.m.shards.pushed = map[string]string{}
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
		if ctx.Err() != nil {
			return
		}
		tk.reshardTask(ctx, id)
	}
	for id := range tk.m.shards.pushed {
		if !seen[id] {
			delete(tk.m.shards.pushed, id)
		}
	}
}

// reshardTask pushes one broadcast task's shards if its running executors
// changed. It holds the task's lock, so it never pushes a task that a
// concurrent stop has just removed from the workers. The caller holds
// m.shards.mu.
func (tk *Tasks) reshardTask(ctx context.Context, id string) {
	defer tk.m.locks.lock("task:" + id)()
	t, err := tk.Get(ctx, id)
	if err != nil || t.Routing != protocol.RoutingBroadcast ||
		(t.Status != store.TaskRunning && t.Status != store.TaskPaused) {
		return
	}
	nodes, err := tk.runningExecutors(ctx, t)
	if err != nil {
		tk.m.log.Error("reshard: running executors", "task", id, "err", err)
		return
	}
	running := make([]string, len(nodes))
	for i := range nodes {
		running[i] = nodes[i].Name
	}
	sig := strings.Join(running, ",")
	if prev, ok := tk.m.shards.pushed[id]; ok && prev == sig {
		return
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { errs[i] = tk.m.client.TaskStart(ctx, &nodes[i], t.specFor(nodes[i].Name, running)) })
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			tk.m.log.Warn("reshard: push failed; retried at the next sweep", "task", id, "node", nodes[i].Name, "err", e)
			delete(tk.m.shards.pushed, id)
			return
		}
	}
	tk.m.shards.pushed[id] = sig
	tk.m.log.Info("broadcast shards pushed", "task", id, "running_executors", len(running))
}

// duties coalesces the cluster reactions to a node status change (reshard,
// misfire accounting) into at most one goroutine: a change while it runs
// makes it run once more.
type duties struct {
	mu      sync.Mutex
	running bool
	again   bool
}

// nodeChanged runs the reactions to a node's status change in the
// background: broadcast shards re-pushed, misfire windows opened or closed.
func (tk *Tasks) nodeChanged() {
	d := &tk.m.duties
	d.mu.Lock()
	if d.running {
		d.again = true
		d.mu.Unlock()
		return
	}
	d.running = true
	d.mu.Unlock()
	started := tk.m.life.goBackground(func(ctx context.Context) {
		for {
			tk.reshard(ctx)
			tk.AccountMisfires(ctx)
			d.mu.Lock()
			if !d.again || ctx.Err() != nil {
				d.running, d.again = false, false
				d.mu.Unlock()
				return
			}
			d.again = false
			d.mu.Unlock()
		}
	})
	if !started {
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}
}
