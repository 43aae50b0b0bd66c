// Task input: what an admin submits, its validation against nodes, users
// and other tasks, and creating and updating tasks.

package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
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
	// Runnable and NotRunnableSince are Task's warning (see Task.Runnable).
	Runnable         *bool      `json:"runnable,omitempty"`
	NotRunnableSince *time.Time `json:"not_runnable_since,omitempty"`
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
	if !TaskAllows(cur.Status, TaskEdit) {
		return nil, Errorf(KindState, "task %s is %s; stop it before editing", id, cur.Status)
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
	if err := in.Validate(time.Now()); err != nil && !Merge(fe, err) {
		return nil, err
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
