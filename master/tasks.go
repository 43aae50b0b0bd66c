package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// TaskInput is a task as an admin or script submits it (SPEC section 7). The
// read-only fields of Task may be sent back and are ignored.
type TaskInput struct {
	protocol.TaskDef
	Executors []string `json:"executors"`
	Keepers   []string `json:"keepers"`
	Children  []string `json:"children"`

	Status     *int       `json:"status,omitempty"`
	LastRunAt  *time.Time `json:"last_run_at,omitempty"`
	NextRunAt  *time.Time `json:"next_run_at,omitempty"`
	RunCount   *int64     `json:"run_count,omitempty"`
	LastResult *string    `json:"last_result,omitempty"`
	CreatedBy  *string    `json:"created_by,omitempty"`
	CreatedAt  *time.Time `json:"created_at,omitempty"`
	UpdatedAt  *time.Time `json:"updated_at,omitempty"`
}

// Task is a task as the open API shows it.
type Task struct {
	protocol.TaskDef
	Executors  []string   `json:"executors"`
	Keepers    []string   `json:"keepers"`
	Children   []string   `json:"children"`
	Status     int        `json:"status"`
	LastRunAt  *time.Time `json:"last_run_at"`
	NextRunAt  *time.Time `json:"next_run_at"`
	RunCount   int64      `json:"run_count"`
	LastResult string     `json:"last_result"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// runGrantTTL is how long a run grant lets a node report runs of a task it
// does not execute; the retention job prunes older grants.
const runGrantTTL = 7 * 24 * time.Hour

// TaskStatusName names a task status for messages.
func TaskStatusName(s int) string {
	switch s {
	case store.TaskDeleted:
		return "deleted"
	case store.TaskStopped:
		return "stopped"
	case store.TaskRunning:
		return "running"
	case store.TaskPaused:
		return "paused"
	}
	return fmt.Sprintf("status %d", s)
}

func decodeTask(t *store.Task) (*Task, error) {
	out := &Task{Executors: t.Executors, Status: t.Status, RunCount: t.RunCount, LastResult: t.LastResult,
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if err := json.Unmarshal([]byte(t.Spec), &out.TaskDef); err != nil {
		return nil, fmt.Errorf("master: task %s: stored definition: %w", t.ID, err)
	}
	out.ID = t.ID
	if err := json.Unmarshal([]byte(t.Keepers), &out.Keepers); err != nil {
		return nil, fmt.Errorf("master: task %s: keepers: %w", t.ID, err)
	}
	if err := json.Unmarshal([]byte(t.Children), &out.Children); err != nil {
		return nil, fmt.Errorf("master: task %s: children: %w", t.ID, err)
	}
	for _, l := range []*[]string{&out.Executors, &out.Keepers, &out.Children} {
		if *l == nil {
			*l = []string{}
		}
	}
	if !t.LastRunAt.IsZero() {
		lr := t.LastRunAt.UTC()
		out.LastRunAt = &lr
	}
	if t.Status == store.TaskRunning {
		if next, ok := protocol.NextFire(&out.TaskDef, time.Now()); ok {
			out.NextRunAt = &next
		}
	}
	return out, nil
}

func mapTaskErr(err error, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: task %s does not exist", ErrNotFound, id)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: task %s changed state meanwhile; reload and retry", ErrState, id)
	}
	return fmt.Errorf("master: task %s: %w", id, err)
}

// GetTask returns one task.
func (m *Master) GetTask(ctx context.Context, id string) (*Task, error) {
	t, err := store.GetTask(ctx, m.st.DB, id)
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	return decodeTask(t)
}

// ListTasks returns a page of tasks and the total.
func (m *Master) ListTasks(ctx context.Context, f store.TaskFilter) ([]Task, int, error) {
	rows, total, err := store.ListTasks(ctx, m.st.DB, f)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Task, 0, len(rows))
	for i := range rows {
		t, err := decodeTask(&rows[i])
		if err != nil {
			return nil, 0, err
		}
		out = append(out, *t)
	}
	return out, total, nil
}

// CreateTask validates and stores a new, stopped task. Without executors it
// gets two running workers picked by priority weight.
func (m *Master) CreateTask(ctx context.Context, in TaskInput, by string) (_ *Task, err error) {
	in.ID = uuid.NewString()
	defer func() {
		target := in.ID
		if err != nil {
			target = "" // no task was made
		}
		m.event(ctx, "task.create", store.TargetTask, target, err, "“"+in.Title+"”")
	}()
	row, err := m.checkTaskInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	row.CreatedBy = by
	row.Status = store.TaskStopped
	err = m.st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		return store.CreateTask(ctx, tx, row)
	})
	if err != nil {
		return nil, fmt.Errorf("master: create task: %w", err)
	}
	m.log.Info("task created", "task", row.ID, "title", row.Title, "executors", row.Executors, "by", by)
	return m.GetTask(ctx, row.ID)
}

// UpdateTask replaces a stopped task's definition.
func (m *Master) UpdateTask(ctx context.Context, id string, in TaskInput) (_ *Task, err error) {
	defer func() { m.event(ctx, "task.edit", store.TargetTask, id, err, "“"+in.Title+"”") }()
	defer m.locks.lock("task:" + id)()
	cur, err := store.GetTask(ctx, m.st.DB, id)
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	if cur.Status != store.TaskStopped {
		return nil, fmt.Errorf("%w: task %s is %s; stop it before editing", ErrState, id, TaskStatusName(cur.Status))
	}
	in.ID = id
	// Secrets are shown masked; an edit that sends the mask back keeps them.
	var stored protocol.TaskDef
	if json.Unmarshal([]byte(cur.Spec), &stored) == nil {
		KeepMaskedSecrets(&in.TaskDef, &stored)
	}
	row, err := m.checkTaskInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	err = m.st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := store.UpdateTask(ctx, tx, row); err != nil {
			return err
		}
		// Runs of a former executor may still be on their way: keep accepting them.
		for _, e := range cur.Executors {
			if !slices.Contains(row.Executors, e) {
				if err := store.AddRunGrant(ctx, tx, id, e); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	m.log.Info("task edited", "task", id)
	return m.GetTask(ctx, id)
}

// checkTaskInput validates everything about a task input and builds its row.
func (m *Master) checkTaskInput(ctx context.Context, in *TaskInput) (*store.Task, error) {
	if in.Timeout == 0 {
		in.Timeout = protocol.Duration(m.defaultTimeout())
	}
	in.Normalize()
	fe := protocol.FieldErrors{}
	if err := in.Validate(time.Now()); err != nil {
		var def protocol.FieldErrors
		if !errors.As(err, &def) {
			return nil, err
		}
		for k, v := range def {
			fe[k] = v
		}
	}
	nodes, err := store.ListNodes(ctx, m.st.DB)
	if err != nil {
		return nil, err
	}
	byName := map[string]store.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	in.Executors = dedupe(in.Executors)
	for _, e := range in.Executors {
		n, ok := byName[e]
		switch {
		case !ok:
			fe["executors"] = fmt.Sprintf("unknown node %q", e)
		case n.Type != store.TypeWorker:
			fe["executors"] = fmt.Sprintf("%q is the master, not a worker", e)
		}
	}
	if len(in.Executors) > 100 {
		fe["executors"] = "at most 100 executors"
	}
	if len(in.Executors) == 0 && fe["executors"] == "" {
		var running []Candidate
		for _, n := range nodes {
			if n.Type == store.TypeWorker && n.Status == store.StatusRunning {
				running = append(running, Candidate{Name: n.Name, Weight: n.Priority})
			}
		}
		for _, c := range PickWeightedN(running, 2, m.cfg.RandN) {
			in.Executors = append(in.Executors, c.Name)
		}
		sort.Strings(in.Executors)
		if len(in.Executors) == 0 {
			fe["executors"] = "no running worker to assign: name the executors, or connect and enable a worker first"
		}
	}
	in.Keepers = dedupe(in.Keepers)
	for _, k := range in.Keepers {
		if _, err := store.GetUser(ctx, m.st.DB, k); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				fe["keepers"] = fmt.Sprintf("unknown user %q", k)
				continue
			}
			return nil, err
		}
	}
	in.Children = dedupe(in.Children)
	if len(in.Children) > 0 {
		all, err := store.TaskChildren(ctx, m.st.DB)
		if err != nil {
			return nil, err
		}
		graph := map[string][]string{}
		for id, js := range all {
			var ch []string
			_ = json.Unmarshal([]byte(js), &ch)
			graph[id] = ch
		}
		graph[in.ID] = in.Children
		for _, c := range in.Children {
			if c == in.ID {
				fe["children"] = "a task cannot be its own child"
				break
			}
			if _, ok := all[c]; !ok {
				fe["children"] = fmt.Sprintf("unknown task %q", c)
				break
			}
		}
		if fe["children"] == "" {
			if cyc := findCycle(graph, in.ID); cyc != nil {
				fe["children"] = "these children form a cycle: " + strings.Join(cyc, " → ")
			}
		}
	}
	if len(fe) > 0 {
		return nil, fe
	}
	spec, err := json.Marshal(in.TaskDef)
	if err != nil {
		return nil, err
	}
	keepers, _ := json.Marshal(in.Keepers)
	children, _ := json.Marshal(in.Children)
	return &store.Task{ID: in.ID, Title: in.Title, Type: in.Type, Spec: string(spec), Keepers: string(keepers),
		Children: string(children), Executors: in.Executors}, nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// findCycle returns a path from start back to start through children, if any.
func findCycle(graph map[string][]string, start string) []string {
	var path []string
	seen := map[string]bool{}
	var visit func(id string) bool
	visit = func(id string) bool {
		path = append(path, id)
		for _, c := range graph[id] {
			if c == start {
				path = append(path, c)
				return true
			}
			if !seen[c] {
				seen[c] = true
				if visit(c) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if visit(start) {
		return path
	}
	return nil
}

// spec is what a worker receives for a task.
func (t *Task) spec() protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: t.TaskDef, Paused: t.Status == store.TaskPaused, Executors: len(t.Executors)}
}

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
		return fmt.Errorf("%w: no running worker for this task (executors: %s)", ErrState, strings.Join(t.Executors, ", "))
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
		for i, e := range errs {
			if e == nil {
				if uerr := undo(context.WithoutCancel(ctx), &nodes[i]); uerr != nil {
					m.log.Error("rollback failed", "task", t.ID, "node", nodes[i].Name, "verb", verb, "err", uerr)
				}
			}
		}
	}
	return fmt.Errorf("%w: %s failed on node %s: %s", ErrWorker, verb, strings.Join(failed, ", "), userError(first))
}

// userError drops the sentinel prefix of a worker error for messages.
func userError(err error) string {
	return strings.TrimPrefix(err.Error(), ErrWorker.Error()+": ")
}

// StartTask starts a stopped task on every running executor.
func (m *Master) StartTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, "start", []int{store.TaskStopped}, store.TaskRunning,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			t.Status = store.TaskRunning
			spec := t.spec()
			return func(ctx context.Context, n *store.Node) error { return m.client.TaskStart(ctx, n, spec) },
				func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
				}
		})
}

// StopTask stops a running or paused task everywhere.
func (m *Master) StopTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, "stop", []int{store.TaskRunning, store.TaskPaused}, store.TaskStopped,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			spec := t.spec()
			return func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskStop, id)
				},
				func(ctx context.Context, n *store.Node) error { return m.client.TaskStart(ctx, n, spec) }
		})
}

// PauseTask keeps a running task's schedule and skips its runs.
func (m *Master) PauseTask(ctx context.Context, id string) (*Task, error) {
	return m.taskTransition(ctx, id, "pause", []int{store.TaskRunning}, store.TaskPaused,
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
	return m.taskTransition(ctx, id, "resume", []int{store.TaskPaused}, store.TaskRunning,
		func(t *Task) (op, undo func(context.Context, *store.Node) error) {
			return func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskResume, id)
				},
				func(ctx context.Context, n *store.Node) error {
					return m.client.TaskOp(ctx, n, protocol.PathTaskPause, id)
				}
		})
}

func (m *Master) taskTransition(ctx context.Context, id, verb string, from []int, to int,
	ops func(t *Task) (op, undo func(context.Context, *store.Node) error)) (_ *Task, err error) {
	defer func() { m.event(ctx, "task."+verb, store.TargetTask, id, err, "") }()
	defer m.locks.lock("task:" + id)()
	t, err := m.GetTask(ctx, id)
	if err != nil {
		return nil, err
	}
	ok := false
	for _, f := range from {
		ok = ok || t.Status == f
	}
	if !ok {
		return nil, fmt.Errorf("%w: task %s is %s; cannot %s it", ErrState, id, TaskStatusName(t.Status), verb)
	}
	op, undo := ops(t)
	if err := m.dispatch(ctx, t, verb, verb == "start", op, undo); err != nil {
		return nil, err
	}
	if err := store.SetTaskStatus(ctx, m.st.DB, id, from, to); err != nil {
		// The workers already changed: undo there so they match the database.
		if uerr := m.dispatch(context.WithoutCancel(ctx), t, "undo "+verb, false, undo, nil); uerr != nil {
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
		return nil, "", fmt.Errorf("%w: no running worker for this task (executors: %s)", ErrState, strings.Join(t.Executors, ", "))
	}
	// The node's report of this run is accepted even if it stops being an
	// executor meanwhile: grant it before it is sent the task.
	if err := store.AddRunGrant(ctx, m.st.DB, id, pick.Name); err != nil {
		return nil, "", fmt.Errorf("master: task %s: %w", id, err)
	}
	for i := range nodes {
		if nodes[i].Name == pick.Name {
			if err := m.client.TaskRunOnce(ctx, &nodes[i], t.spec()); err != nil {
				return nil, "", fmt.Errorf("%w: run once failed on node %s: %s", ErrWorker, pick.Name, userError(err))
			}
		}
	}
	m.log.Info("task run once", "task", id, "node", pick.Name)
	m.event(ctx, "task.run", store.TargetTask, id, nil, "on node "+pick.Name)
	return t, pick.Name, nil
}

// DeleteTask stops a task everywhere and marks it deleted; its runs stay.
func (m *Master) DeleteTask(ctx context.Context, id string) (err error) {
	defer func() { m.event(ctx, "task.delete", store.TargetTask, id, err, "") }()
	t, err := m.GetTask(ctx, id)
	if err != nil {
		return err
	}
	if t.Status == store.TaskRunning || t.Status == store.TaskPaused {
		if _, err := m.StopTask(ctx, id); err != nil {
			return err
		}
	}
	defer m.locks.lock("task:" + id)()
	if err := store.SetTaskStatus(ctx, m.st.DB, id, []int{store.TaskStopped}, store.TaskDeleted); err != nil {
		return mapTaskErr(err, id)
	}
	m.log.Info("task deleted", "task", id)
	return nil
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
		out = append(out, t.spec())
	}
	return out
}
