// Task dispatch: start, stop, pause, resume and run once on the executors,
// with rollback when an executor fails.

package master

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// runningExecutors returns the task's executors that are running, in name order.
func (m *Master) runningExecutors(ctx context.Context, t *Task) ([]store.Node, error) {
	if len(t.Executors) == 0 {
		return nil, nil
	}
	nodes, err := store.RunningNodesNamed(ctx, m.st.DB, t.Executors)
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
func (m *Master) dispatch(ctx context.Context, t *Task, verb string, needRunning bool, op, undo func(context.Context, *store.Node) error) error {
	nodes, err := m.runningExecutors(ctx, t)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		if !needRunning {
			return nil
		}
		return Errorf(KindState, "no running worker for this task (executors: %s)", strings.Join(t.Executors, ", "))
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
		uctx, cancel := m.detached(ctx, m.cfg.CallTimeout+time.Second)
		defer cancel()
		for i, e := range errs {
			if e == nil {
				if uerr := undo(uctx, &nodes[i]); uerr != nil {
					m.log.Error("rollback failed", "task", t.ID, "node", nodes[i].Name, "verb", verb, "err", uerr)
				}
			}
		}
	}
	return wrapf(KindWorker, first, "%s failed on node %s: %s", verb, strings.Join(failed, ", "), Message(first))
}

// StartTask starts a stopped task on every running executor.
func (m *Master) StartTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, TaskStart, store.TaskRunning,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			t.Status = store.TaskRunning
			return func(ctx context.Context, n *store.Node) error { return m.client.TaskStart(ctx, n, t.specFor(n.Name)) },
				func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
				}
		})
}

// StopTask stops a running or paused task everywhere.
func (m *Master) StopTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, TaskStop, store.TaskStopped,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			before := *t // the undo restarts the task as it was
			return func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return m.client.TaskStart(ctx, n, before.specFor(n.Name))
				}
		})
}

// PauseTask keeps a running task's schedule and skips its runs.
func (m *Master) PauseTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, TaskPause, store.TaskPaused,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			return func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskPause, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskResume, id)
				}
		})
}

// ResumeTask lets a paused task run again.
func (m *Master) ResumeTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, TaskResume, store.TaskRunning,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			return func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskResume, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskPause, id)
				}
		})
}

// taskTransition moves a task whose status allows a (the state table) to status to,
// after ops succeeded on every running executor.
func (m *Master) taskTransition(ctx context.Context, id string, a TaskAction, to store.TaskStatus,
	ops func(t *Task) (op, undo func(context.Context, *store.Node) error)) (_ *Task, err error) {
	verb, from := string(a), taskFrom(a)
	defer func() { m.event(ctx, "task."+verb, store.TargetTask, id, err, "") }()
	defer m.locks.lock("task:" + id)()
	t, err := m.GetTask(ctx, id)
	if err != nil {
		return nil, err
	}
	if !TaskAllows(t.Status, a) {
		return nil, Errorf(KindState, "task %s is %s; cannot %s it", id, t.Status, verb)
	}
	op, undo := ops(t)
	if err := m.dispatch(ctx, t, verb, verb == "start", op, undo); err != nil {
		return nil, err
	}
	if err := store.SetTaskStatus(ctx, m.st.DB, id, from, to); err != nil {
		// The workers already changed: undo there so they match the database.
		uctx, cancel := m.detached(ctx, 2*(m.cfg.CallTimeout+time.Second))
		uerr := m.dispatch(uctx, t, "undo "+verb, false, undo, nil)
		cancel()
		if uerr != nil {
			m.log.Error("undo after a failed status update", "task", id, "err", uerr)
		}
		return nil, mapTaskErr(err, id)
	}
	m.log.Info("task "+verb, "task", id)
	return m.GetTask(ctx, id)
}

// RunTask runs a task once now on one running executor picked by priority weight.
func (m *Master) RunTask(ctx context.Context, id string) (_ *Task, _ string, err error) {
	defer func() {
		if err != nil {
			m.event(ctx, "task.run", store.TargetTask, id, err, "")
		}
	}()
	t, err := m.GetTask(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if !TaskAllows(t.Status, TaskRun) {
		return nil, "", Errorf(KindState, "task %s is %s; cannot run it", id, t.Status)
	}
	nodes, err := m.runningExecutors(ctx, t)
	if err != nil {
		return nil, "", err
	}
	cands := make([]Candidate, len(nodes))
	for i, n := range nodes {
		cands[i] = Candidate{Name: n.Name, Weight: n.Priority}
	}
	pick, ok := PickWeighted(cands, m.cfg.RandN)
	if !ok {
		return nil, "", Errorf(KindState, "no running worker for this task (executors: %s)", strings.Join(t.Executors, ", "))
	}
	// The node's report of this run is accepted even if it stops being an
	// executor meanwhile: grant it before it is sent the task.
	if err := store.AddRunGrant(ctx, m.st.DB, id, pick.Name); err != nil {
		return nil, "", fmt.Errorf("master: task %s: %w", id, err)
	}
	for i := range nodes {
		if nodes[i].Name == pick.Name {
			if err := m.client.TaskRunOnce(ctx, &nodes[i], t.specFor(nodes[i].Name)); err != nil {
				return nil, "", wrapf(KindWorker, err, "run once failed on node %s: %s", pick.Name, Message(err))
			}
		}
	}
	m.log.Info("task run once", "task", id, "node", pick.Name)
	m.event(ctx, "task.run", store.TargetTask, id, nil, "on node "+pick.Name)
	return t, pick.Name, nil
}
