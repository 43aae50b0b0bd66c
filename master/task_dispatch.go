// Task dispatch: start, stop, pause, resume and run once on the executors,
// with rollback when an executor fails.

package master

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// runningExecutors returns the task's executors that are running, in name order.
func (tk *Tasks) runningExecutors(ctx context.Context, t *Task) ([]store.Node, error) {
	members := t.members()
	if len(members) == 0 {
		return nil, nil
	}
	nodes, err := store.RunningNodesNamed(ctx, tk.m.st.DB, members)
	if err != nil {
		return nil, err
	}
	out := nodes[:0]
	for _, n := range nodes {
		if n.Type == store.TypeWorker {
			out = append(out, n)
		}
	}
	return out, nil
}

// dispatch runs op on every running executor at once. When one fails it
// undoes op on those that succeeded and returns an error naming the node.
// With needRunning false an operation with no running executor succeeds: a
// worker that is not running has no schedule, and gets the task's state pushed
// when it comes back.
func (tk *Tasks) dispatch(ctx context.Context, t *Task, verb string, needRunning bool, op, undo func(context.Context, *store.Node) error) error {
	nodes, err := tk.runningExecutors(ctx, t)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		if !needRunning {
			return nil
		}
		return Errorf(KindState, "no running worker for this task (%s)", t.executorsText())
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = op(ctx, &nodes[i])
		}()
	}
	wg.Wait()
	var failed []string
	var first error
	for i, e := range errs {
		if e != nil {
			failed = append(failed, nodes[i].Name)
			if first == nil {
				first = e
			}
		}
	}
	if first == nil {
		return nil
	}
	if undo != nil {
		uctx, cancel := tk.m.life.detached(ctx, tk.m.cfg.CallTimeout+time.Second)
		defer cancel()
		for i, e := range errs {
			if e == nil {
				if uerr := undo(uctx, &nodes[i]); uerr != nil {
					tk.m.log.Error("rollback failed", "task", t.ID, "node", nodes[i].Name, "verb", verb, "err", uerr)
				}
			}
		}
	}
	return wrapf(KindWorker, first, "%s failed on node %s: %s", verb, strings.Join(failed, ", "), Message(first))
}

// switchLive moves a running or paused task's executors from before to
// after, all at once: after's running executors get its definition (a
// worker that has the task replaces it), before's that are not among them
// stop it. When one fails, each that succeeded is put back (before's
// definition again, or stopped when it was not an executor), and the error
// names the nodes that failed.
func (tk *Tasks) switchLive(ctx context.Context, before, after *Task) error {
	was, err := tk.runningExecutors(ctx, before)
	if err != nil {
		return err
	}
	will, err := tk.runningExecutors(ctx, after)
	if err != nil {
		return err
	}
	type move struct {
		node      store.Node
		in, prior bool // an executor after the edit, before it
	}
	var moves []move
	seen := map[string]int{}
	for _, n := range will {
		seen[n.Name] = len(moves)
		moves = append(moves, move{node: n, in: true})
	}
	for _, n := range was {
		if i, ok := seen[n.Name]; ok {
			moves[i].prior = true
			continue
		}
		moves = append(moves, move{node: n, prior: true})
	}
	runningAfter, runningBefore := tk.shardSet(ctx, after), tk.shardSet(ctx, before)
	start := func(ctx context.Context, t *Task, n *store.Node, running []string) error {
		return tk.m.client.TaskStart(ctx, n, t.specFor(n.Name, running))
	}
	stop := func(ctx context.Context, n *store.Node) error {
		return tk.m.client.TaskOp(ctx, n, protocol.PathTaskStop, after.ID)
	}
	errs := make([]error, len(moves))
	var wg sync.WaitGroup
	for i := range moves {
		wg.Go(func() {
			mv := &moves[i]
			if mv.in {
				errs[i] = start(ctx, after, &mv.node, runningAfter)
			} else {
				errs[i] = stop(ctx, &mv.node)
			}
		})
	}
	wg.Wait()
	var failed []string
	var first error
	for i, e := range errs {
		if e != nil {
			failed = append(failed, moves[i].node.Name)
			if first == nil {
				first = e
			}
		}
	}
	if first == nil {
		return nil
	}
	uctx, cancel := tk.m.life.detached(ctx, tk.m.cfg.CallTimeout+time.Second)
	defer cancel()
	for i, e := range errs {
		if e != nil {
			continue
		}
		mv := &moves[i]
		var uerr error
		if mv.prior {
			uerr = start(uctx, before, &mv.node, runningBefore)
		} else {
			uerr = stop(uctx, &mv.node)
		}
		if uerr != nil {
			tk.m.log.Error("rollback of a live edit failed", "task", after.ID, "node", mv.node.Name, "err", uerr)
		}
	}
	return wrapf(KindWorker, first, "edit failed on node %s: %s; every executor keeps the previous definition",
		strings.Join(failed, ", "), Message(first))
}

// Start starts a stopped task on every running executor.
func (tk *Tasks) Start(ctx context.Context, id string) (*Task, error) {
	return tk.taskTransition(ctx, id, TaskStart, store.TaskRunning,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			t.Status = store.TaskRunning
			running := tk.shardSet(ctx, t)
			return func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskStart(ctx, n, t.specFor(n.Name, running))
				},
				func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
				}
		})
}

// Stop stops a running or paused task everywhere.
func (tk *Tasks) Stop(ctx context.Context, id string) (*Task, error) {
	return tk.taskTransition(ctx, id, TaskStop, store.TaskStopped,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			before := *t // the undo restarts the task as it was
			running := tk.shardSet(ctx, t)
			return func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskStart(ctx, n, before.specFor(n.Name, running))
				}
		})
}

// Pause keeps a running task's schedule and skips its runs.
func (tk *Tasks) Pause(ctx context.Context, id string) (*Task, error) {
	return tk.taskTransition(ctx, id, TaskPause, store.TaskPaused,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			return func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskOp(ctx, n, protocol.PathTaskPause, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskOp(ctx, n, protocol.PathTaskResume, id)
				}
		})
}

// Resume lets a paused task run again.
func (tk *Tasks) Resume(ctx context.Context, id string) (*Task, error) {
	return tk.taskTransition(ctx, id, TaskResume, store.TaskRunning,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			return func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskOp(ctx, n, protocol.PathTaskResume, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return tk.m.client.TaskOp(ctx, n, protocol.PathTaskPause, id)
				}
		})
}

// taskTransition moves a task whose status allows a (the state table) to status to,
// after ops succeeded on every running executor.
func (tk *Tasks) taskTransition(ctx context.Context, id string, a TaskAction, to store.TaskStatus,
	ops func(t *Task) (op, undo func(context.Context, *store.Node) error)) (_ *Task, err error) {
	verb, from := string(a), taskFrom(a)
	defer func() { tk.m.events.record(ctx, "task."+verb, store.TargetTask, id, err, "") }()
	defer tk.m.locks.lock("task:" + id)()
	ctx, t, err := tk.taskFor(ctx, id, ActOperate)
	if err != nil {
		return nil, err
	}
	if !TaskAllows(t.Status, a) {
		return nil, Errorf(KindState, "task %s is %s; cannot %s it", id, t.Status, verb)
	}
	op, undo := ops(t)
	if err := tk.dispatch(ctx, t, verb, verb == "start", op, undo); err != nil {
		return nil, err
	}
	if err := store.SetTaskStatus(ctx, tk.m.st.DB, id, from, to); err != nil {
		// The workers already changed: undo there so they match the database.
		uctx, cancel := tk.m.life.detached(ctx, 2*(tk.m.cfg.CallTimeout+time.Second))
		uerr := tk.dispatch(uctx, t, "undo "+verb, false, undo, nil)
		cancel()
		if uerr != nil {
			tk.m.log.Error("undo after a failed status update", "task", id, "err", uerr)
		}
		return nil, mapTaskErr(err, id)
	}
	tk.m.log.Info("task "+verb, "task", id)
	return tk.Get(ctx, id)
}

// shardSet is what broadcast shards of t are counted among: its running
// executors' names (nil for other routings, which have no shard).
func (tk *Tasks) shardSet(ctx context.Context, t *Task) []string {
	if t.Routing != protocol.RoutingBroadcast {
		return nil
	}
	running, err := tk.runningNames(ctx, t.members())
	if err != nil {
		tk.m.log.Error("running executors for shards", "task", t.ID, "err", err)
	}
	return running
}

// Run runs a task once now on the running executor its routing picks
// (every running executor under broadcast, each told its shard). It returns
// the task and the names of the nodes the run went to, comma-separated.
func (tk *Tasks) Run(ctx context.Context, id string) (_ *Task, _ string, err error) {
	defer func() {
		if err != nil {
			tk.m.events.record(ctx, "task.run", store.TargetTask, id, err, "")
		}
	}()
	ctx, t, err := tk.taskFor(ctx, id, ActOperate)
	if err != nil {
		return nil, "", err
	}
	if !TaskAllows(t.Status, TaskRun) {
		return nil, "", Errorf(KindState, "task %s is %s; cannot run it", id, t.Status)
	}
	sent, err := tk.runOnce(ctx, t, nil)
	if err != nil {
		return nil, "", err
	}
	names := strings.Join(sent, ", ")
	tk.m.log.Info("task run once", "task", id, "node", names, "routing", t.Routing)
	tk.m.events.record(ctx, "task.run", store.TargetTask, id, nil, "on node "+names)
	return t, names, nil
}

// runOnce sends t to run once now to the running executors its routing
// picks and returns their names. Under broadcast a node that fails does not
// undo the others (a run cannot be taken back): the error names it.
// catchUp, for a catch-up run, is what it stands for (nil: a run now).
func (tk *Tasks) runOnce(ctx context.Context, t *Task, catchUp *protocol.CatchUp) ([]string, error) {
	nodes, err := tk.runningExecutors(ctx, t)
	if err != nil {
		return nil, err
	}
	picks, err := tk.pickRunOnce(ctx, t, nodes)
	if err != nil {
		return nil, err
	}
	if len(picks) == 0 {
		return nil, Errorf(KindState, "no running worker for this task (%s)", t.executorsText())
	}
	running := make([]string, len(nodes))
	for i := range nodes {
		running[i] = nodes[i].Name
	}
	// A node's report of this run is accepted even if it stops being an
	// executor meanwhile: grant it before it is sent the task.
	for _, n := range picks {
		if err := store.AddRunGrant(ctx, tk.m.st.DB, t.ID, n.Name); err != nil {
			return nil, fmt.Errorf("master: task %s: %w", t.ID, err)
		}
	}
	errs := make([]error, len(picks))
	var wg sync.WaitGroup
	for i, n := range picks {
		wg.Go(func() { errs[i] = tk.m.client.TaskRunOnce(ctx, n, t.specFor(n.Name, running), catchUp) })
	}
	wg.Wait()
	var sent, failed []string
	var first error
	for i, e := range errs {
		if e != nil {
			failed = append(failed, picks[i].Name)
			first = cmp.Or(first, e)
		} else {
			sent = append(sent, picks[i].Name)
		}
	}
	if first != nil {
		msg := fmt.Sprintf("run once failed on node %s: %s", strings.Join(failed, ", "), Message(first))
		if len(sent) > 0 {
			msg += "; it was sent to " + strings.Join(sent, ", ")
		}
		return nil, wrapf(KindWorker, first, "%s", msg)
	}
	return sent, nil
}

// pickRunOnce chooses, by the task's routing, which of its running
// executors run a manual run: as a fire would be routed, with now as the
// fire for the strategies that look at one.
func (tk *Tasks) pickRunOnce(ctx context.Context, t *Task, nodes []store.Node) ([]*store.Node, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	if t.Routing == protocol.RoutingBroadcast {
		out := make([]*store.Node, len(nodes))
		for i := range nodes {
			out[i] = &nodes[i]
		}
		return out, nil
	}
	cands := make([]Candidate, len(nodes))
	for i, n := range nodes {
		cands[i] = Candidate{Name: n.Name, Weight: n.Priority}
	}
	var pick Candidate
	now := time.Now()
	switch t.Routing {
	case protocol.RoutingFailover:
		pick = RankFailover(cands)[0]
	case protocol.RoutingRoundRobin:
		last, err := store.LastRouted(ctx, tk.m.st.DB, t.ID)
		if err != nil {
			return nil, err
		}
		pick = RankRoundRobin(last, cands)[0]
	case protocol.RoutingLeastBusy:
		busy, err := store.ClaimCountsSince(ctx, tk.m.st.DB, now.Add(-busyWindow))
		if err != nil {
			return nil, err
		}
		pick = RankLeastBusy(t.ID, now, busy, cands)[0]
	case protocol.RoutingHash:
		pick = RankHash(t.ID, t.Params[t.RoutingKey], cands)[0]
	default:
		pick, _ = PickWeighted(cands, tk.m.cfg.RandN)
	}
	for i := range nodes {
		if nodes[i].Name == pick.Name {
			return []*store.Node{&nodes[i]}, nil
		}
	}
	return nil, nil
}
