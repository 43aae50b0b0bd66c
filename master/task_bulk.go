// Bulk actions: one action on many tasks, each task on its own.

package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// MaxBulkTasks bounds how many tasks one bulk action names: the work is
// done a chunk at a time (bulkChunk tasks), so the bound is the time of one
// request, not memory.
const MaxBulkTasks = 10_000

// bulkChunk is how many tasks of a bulk action are read, sent to the
// workers and written at once: one read, a few calls per worker, one
// transaction.
const bulkChunk = 1000

// BulkActions are the actions a bulk request may ask for.
var BulkActions = []TaskAction{TaskStart, TaskPause, TaskResume, TaskStop, TaskDelete}

// BulkResult is the outcome of a bulk action for one task: OK, or Error
// saying why not. Refused says the task was left as it was because its
// status (or its absence) does not allow the action; otherwise the action
// was tried and failed (e.g. a worker did not answer).
type BulkResult struct {
	ID      string `json:"id"`
	Title   string `json:"title,omitempty"`
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Refused bool   `json:"refused,omitempty"`
}

// CheckBulk validates a bulk request as a whole: a known action and from 1
// to MaxBulkTasks task ids. It returns the ids without repeats, in order.
func CheckBulk(action string, ids []string) ([]string, error) {
	if !slices.Contains(BulkActions, TaskAction(action)) {
		names := make([]string, len(BulkActions))
		for i, a := range BulkActions {
			names[i] = string(a)
		}
		return nil, Errorf(KindInvalid, "unknown action %q: it must be one of %s", bulkClip(action, 40), strings.Join(names, ", "))
	}
	if len(ids) > MaxBulkTasks {
		return nil, Errorf(KindInvalid, "%d tasks named: at most %d at once", len(ids), MaxBulkTasks)
	}
	out := make([]string, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, Errorf(KindInvalid, "no task selected: select at least one task")
	}
	return out, nil
}

// Bulk does action (start, pause, resume, stop or delete) to each
// task of ids, each on its own: a task that does not exist, that whoever
// asks may not act on, whose status does not allow the action, or whose
// action fails is reported and never stops the others. Delete is refused
// for a task that is not stopped (unlike Tasks.Delete, which stops it first):
// a selection may hold running tasks by mistake. The work is batched
// (bulkChunk tasks at a time): the tasks read at once, one call per worker
// carrying its tasks (one call per task to a worker too old for that), the
// statuses written in one transaction. The results are in the order of
// the ids, repeats removed.
func (tk *Tasks) Bulk(ctx context.Context, action string, ids []string) ([]BulkResult, error) {
	ids, err := CheckBulk(action, ids)
	if err != nil {
		return nil, err
	}
	a := TaskAction(action)
	if p := PrincipalFrom(ctx); p != nil && !p.CanAnywhere(bulkAct(a)) {
		return nil, Errorf(KindForbidden, "forbidden: your role may not %s in any project", actionVerb[bulkAct(a)])
	}
	var running map[string]*store.Node
	if a != TaskDelete {
		if running, err = tk.runningWorkers(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]BulkResult, len(ids))
	for i := 0; i < len(ids); i += bulkChunk {
		end := min(i+bulkChunk, len(ids))
		if err := tk.bulkChunkOf(ctx, a, ids[i:end], out[i:end], running); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bulkAct is what a bulk action needs the caller's role to allow.
func bulkAct(a TaskAction) Action {
	if a == TaskDelete {
		return ActEdit
	}
	return ActOperate
}

// runningWorkers returns the running workers by name.
func (tk *Tasks) runningWorkers(ctx context.Context) (map[string]*store.Node, error) {
	nodes, err := store.ListNodesByStatus(ctx, tk.m.st.DB, store.StatusRunning)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*store.Node, len(nodes))
	for i := range nodes {
		if nodes[i].Type == store.TypeWorker {
			out[nodes[i].Name] = &nodes[i]
		}
	}
	return out, nil
}

// bulkItem is one task of a chunk on its way: its result, the task, and
// its running executors (the nodes the action goes to).
type bulkItem struct {
	r     *BulkResult
	t     *Task
	nodes []*store.Node
	specs []protocol.TaskSpec // per node: what it is sent (start) or given back (undo of a stop)
	done  []bool              // per node: the action was done there
	err   error
}

// bulkChunkOf does a to one chunk of ids, filling out (same order). Only a
// database failure of the chunk as a whole is returned.
func (tk *Tasks) bulkChunkOf(ctx context.Context, a TaskAction, ids []string, out []BulkResult, running map[string]*store.Node) error {
	began := time.Now()
	sorted := slices.Sorted(slices.Values(ids))
	for _, id := range sorted { // in one order: two bulk actions never wait on each other
		defer tk.m.locks.lock("task:" + id)()
	}
	rows, err := store.GetTasks(ctx, tk.m.st.DB, ids)
	if err != nil {
		return err
	}
	names, err := tk.m.projects.Names(ctx)
	if err != nil {
		return err
	}
	var items []*bulkItem
	for i, id := range ids {
		r := &out[i]
		*r = BulkResult{ID: id}
		row := rows[id]
		if row == nil {
			r.Error, r.Refused = "no such task", true
			continue
		}
		if err := authorize(ctx, row.ProjectID, bulkAct(a), taskNotFound(id)); err != nil {
			if errors.Is(err, ErrNotFound) {
				r.Error, r.Refused = "no such task", true
			} else {
				*r = tk.bulkFailed(*r, a, err)
			}
			continue
		}
		t, err := decodeTask(row)
		if err != nil {
			*r = tk.bulkFailed(*r, a, err)
			continue
		}
		t.Project = names[t.ProjectID]
		r.Title = t.Title
		if !TaskAllows(t.Status, a) {
			r.Error, r.Refused = bulkRefusal(a, t.Status), true
			continue
		}
		it := &bulkItem{r: r, t: t}
		if a != TaskDelete {
			tk.bulkTargets(it, a, running)
			if it.err != nil {
				*r = tk.bulkFailed(*r, a, it.err)
				continue
			}
		}
		items = append(items, it)
	}
	read := time.Since(began)
	if a != TaskDelete {
		tk.bulkSend(ctx, a, items, false)
	}
	sent := time.Since(began) - read
	// The statuses of the tasks done everywhere, in one transaction (or a
	// few); a task another master moved meanwhile is undone on its workers.
	var okIDs []string
	for _, it := range items {
		if it.err == nil {
			okIDs = append(okIDs, it.t.ID)
		}
	}
	changed, err := store.SetTasksStatus(ctx, tk.m.st.DB, okIDs, taskFrom(a), bulkTo[a])
	if err != nil {
		tk.m.log.Error("bulk task action: write statuses", "action", a, "err", err)
	}
	moved := map[string]bool{}
	for _, id := range okIDs {
		moved[id] = true
	}
	for _, id := range changed {
		delete(moved, id)
	}
	var undo []*bulkItem
	for _, it := range items {
		if it.err == nil && moved[it.t.ID] {
			it.err = Errorf(KindState, "task %s changed state meanwhile; reload and retry", it.t.ID)
			if err != nil {
				it.err = fmt.Errorf("master: task %s: %w", it.t.ID, err)
			}
			undo = append(undo, it)
		}
	}
	if len(undo) > 0 && a != TaskDelete {
		uctx, cancel := tk.m.life.detached(ctx, 2*(tk.m.cfg.CallTimeout+time.Second))
		tk.bulkSend(uctx, a, undo, true)
		cancel()
	}
	evs := make([]store.Event, 0, len(items))
	for _, it := range items {
		if it.err != nil {
			*it.r = tk.bulkFailed(*it.r, a, it.err)
		} else {
			it.r.OK = true
		}
		e := store.Event{At: time.Now(), Actor: ActorFrom(ctx), Action: "task." + string(a), TargetType: store.TargetTask,
			Target: it.t.ID, Outcome: store.OutcomeOK, Detail: "bulk", ProjectID: it.t.ProjectID}
		if it.err != nil {
			e.Outcome, e.Detail = store.OutcomeError, "bulk: "+Message(it.err)
		}
		evs = append(evs, e)
	}
	tk.m.events.recordAll(ctx, "task."+string(a)+" (bulk)", evs)
	tk.m.log.Info("bulk task action", "action", a, "tasks", len(ids), "done", len(changed), "read", read.Round(time.Millisecond),
		"sent", sent.Round(time.Millisecond), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// bulkTo is the status each bulk action leaves a task in.
var bulkTo = map[TaskAction]store.TaskStatus{
	TaskStart: store.TaskRunning, TaskPause: store.TaskPaused, TaskResume: store.TaskRunning,
	TaskStop: store.TaskStopped, TaskDelete: store.TaskDeleted,
}

// bulkTargets fills the nodes an action on it.t goes to (its running
// executors) and what each is sent; a start with none is refused, as
// Tasks.Start refuses it.
func (tk *Tasks) bulkTargets(it *bulkItem, a TaskAction, running map[string]*store.Node) {
	var names []string
	for _, name := range it.t.members() {
		if n := running[name]; n != nil {
			it.nodes = append(it.nodes, n)
			names = append(names, name)
		}
	}
	if len(it.nodes) == 0 && a == TaskStart {
		it.err = Errorf(KindState, "no running worker for this task (%s)", it.t.executorsText())
		return
	}
	spec := *it.t
	if a == TaskStart {
		spec.Status = store.TaskRunning
	}
	var shards []string
	if spec.Routing == protocol.RoutingBroadcast {
		shards = names
	}
	it.specs = make([]protocol.TaskSpec, len(it.nodes))
	for i, n := range it.nodes {
		it.specs[i] = spec.specFor(n.Name, shards)
	}
	it.done = make([]bool, len(it.nodes))
}

// bulkOps is the worker operation of each bulk action and the one that
// undoes it.
var bulkOps = map[TaskAction][2]string{
	TaskStart:  {protocol.BatchStart, protocol.BatchStop},
	TaskStop:   {protocol.BatchStop, protocol.BatchStart},
	TaskPause:  {protocol.BatchPause, protocol.BatchResume},
	TaskResume: {protocol.BatchResume, protocol.BatchPause},
}

// bulkJob is one task's part of a batched operation on one node.
type bulkJob struct {
	it   *bulkItem
	node int // index in it.nodes
}

// bulkSend does a (or, with undo, what undoes it) on the nodes of items,
// one node's tasks in calls of up to protocol.MaxTaskBatch, every node at
// once. Without undo, a task that failed on a node is undone on those it
// was done on, and its error names the nodes; with undo, the nodes it was
// done on get it undone, and a failure is only logged.
func (tk *Tasks) bulkSend(ctx context.Context, a TaskAction, items []*bulkItem, undo bool) {
	op := bulkOps[a][0]
	if undo {
		op = bulkOps[a][1]
	}
	jobs := map[string][]bulkJob{}
	nodes := map[string]*store.Node{}
	for _, it := range items {
		if it.err != nil && !undo {
			continue
		}
		for i, n := range it.nodes {
			if undo && !it.done[i] {
				continue
			}
			jobs[n.Name] = append(jobs[n.Name], bulkJob{it: it, node: i})
			nodes[n.Name] = n
		}
	}
	errs := tk.sendJobs(ctx, op, nodes, jobs)
	if undo {
		for name, es := range errs {
			for j, err := range es {
				if err != nil {
					tk.m.log.Error("rollback failed", "task", jobs[name][j].it.t.ID, "node", name, "verb", op, "err", err)
				}
			}
		}
		return
	}
	failed := map[*bulkItem][]string{}
	firsts := map[*bulkItem]error{}
	for name, es := range errs {
		for j, err := range es {
			job := jobs[name][j]
			if err == nil {
				job.it.done[job.node] = true
				continue
			}
			failed[job.it] = append(failed[job.it], name)
			if firsts[job.it] == nil {
				firsts[job.it] = err
			}
		}
	}
	if len(failed) == 0 {
		return
	}
	var back []*bulkItem
	for it, names := range failed {
		slices.Sort(names)
		first := firsts[it]
		it.err = wrapf(KindWorker, first, "%s failed on node %s: %s", a, strings.Join(names, ", "), Message(first))
		back = append(back, it)
	}
	uctx, cancel := tk.m.life.detached(ctx, 2*(tk.m.cfg.CallTimeout+time.Second))
	defer cancel()
	tk.bulkSend(uctx, a, back, true)
}

// bulkBatchBytes bounds the request of one batched call by its specs' size.
const bulkBatchBytes = 8 << 20

// sendJobs does op to the jobs of each node and returns each job's
// outcome, by node in the order of jobs. The nodes are served at once,
// each in calls of up to protocol.MaxTaskBatch tasks (one call per task
// to a worker too old for batches).
func (tk *Tasks) sendJobs(ctx context.Context, op string, nodes map[string]*store.Node, jobs map[string][]bulkJob) map[string][]error {
	out := make(map[string][]error, len(jobs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, js := range jobs {
		n := nodes[name]
		wg.Go(func() {
			errs := make([]error, len(js))
			for lo := 0; lo < len(js); {
				hi, size := lo, 0
				for hi < len(js) && hi-lo < protocol.MaxTaskBatch && (hi == lo || size < bulkBatchBytes) {
					size += specBytes(&js[hi].it.specs[js[hi].node])
					hi++
				}
				tk.sendBatch(ctx, op, n, js[lo:hi], errs[lo:hi])
				lo = hi
			}
			mu.Lock()
			out[name] = errs
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// sendBatch does op to jobs on n in one call, or one call per job when n
// is too old for batches, filling errs.
func (tk *Tasks) sendBatch(ctx context.Context, op string, n *store.Node, jobs []bulkJob, errs []error) {
	var specs []protocol.TaskSpec
	var ids []string
	for _, j := range jobs {
		if op == protocol.BatchStart {
			specs = append(specs, j.it.specs[j.node])
		} else {
			ids = append(ids, j.it.t.ID)
		}
	}
	got, err := tk.m.client.TaskBatch(ctx, n, op, specs, ids)
	switch {
	case err == nil:
		copy(errs, got)
		return
	case !IsNoRoute(err):
		for i := range errs {
			errs[i] = err
		}
		return
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if op == protocol.BatchStart {
				errs[i] = tk.m.client.TaskStart(ctx, n, j.it.specs[j.node])
			} else {
				errs[i] = tk.m.client.TaskOp(ctx, n, batchOpPath[op], j.it.t.ID)
			}
		})
	}
	wg.Wait()
}

// bulkFailed reports an action that was tried and failed: a refusal with
// its sentence, anything else (a database error) only in the log.
func (tk *Tasks) bulkFailed(r BulkResult, a TaskAction, err error) BulkResult {
	if KindOf(err) == 0 {
		tk.m.log.Error("bulk task action", "action", a, "task", r.ID, "err", err)
		r.Error = "internal error; see the master's log"
		return r
	}
	r.Error, r.Refused = Message(err), errors.Is(err, ErrState)
	return r
}

// bulkRefusal says why a task in status s is left alone by a.
func bulkRefusal(a TaskAction, s store.TaskStatus) string {
	switch {
	case a == TaskDelete && TaskAllows(s, TaskStop):
		return "it is " + s.String() + " — stop it first"
	case a == TaskStop:
		return "it is already stopped"
	case a == TaskStart && s == store.TaskRunning:
		return "it is already running"
	case a == TaskPause && s == store.TaskPaused:
		return "it is already paused"
	case a == TaskPause:
		return "it is " + s.String() + " — only a running task can be paused"
	case a == TaskResume && s == store.TaskRunning:
		return "it is already running"
	case a == TaskResume:
		return "it is " + s.String() + " — only a paused task can be resumed"
	}
	return "it is " + s.String()
}

// bulkClip shortens s to at most n bytes (on a rune boundary) for a message.
func bulkClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
