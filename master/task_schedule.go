// What workers schedule: the spec pushed for a task and the tasks a node
// runs, pushed on Enable, registration and recovery.

package master

import (
	"context"
	"slices"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// spec is what a worker receives for a task.
func (t *Task) spec() protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: t.TaskDef, Paused: t.Status == store.TaskPaused, Executors: len(t.Executors)}
}

// specFor is what node receives for a task: with broadcast routing, its shard
// is its place among the task's executors sorted by name, so each executor
// knows its slice of the work without asking anyone at fire time.
func (t *Task) specFor(node string) protocol.TaskSpec {
	s := t.spec()
	if t.Routing == protocol.RoutingBroadcast {
		names := slices.Sorted(slices.Values(t.Executors))
		s.ShardIndex, s.ShardTotal = max(slices.Index(names, node), 0), len(names)
	}
	return s
}

// tasksFor returns the running and paused tasks a node executes, pushed on
// Enable, registration and recovery.
func (m *Master) tasksFor(ctx context.Context, node string) []protocol.TaskSpec {
	rows, err := store.TasksOfNode(ctx, m.st.DB, node)
	if err != nil {
		m.log.Error("load tasks of node", "node", node, "err", err)
		return []protocol.TaskSpec{}
	}
	out := make([]protocol.TaskSpec, 0, len(rows))
	for i := range rows {
		t, err := decodeTask(&rows[i])
		if err != nil {
			m.log.Error("skip task with a bad stored definition", "task", rows[i].ID, "err", err)
			continue
		}
		out = append(out, t.specFor(node))
	}
	return out
}
