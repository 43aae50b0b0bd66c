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
	// Selector is a label selector (see protocol.ParseSelector): the
	// approved workers it selects at fire time are executors too.
	Selector string   `json:"selector"`
	Keepers  []string `json:"keepers"`
	Children []string `json:"children"`
	// Selected is Task's read-only list of selected workers, accepted back
	// and ignored.
	Selected []string `json:"selected,omitempty"`

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
	// Health is Task's read-only health, accepted back and ignored.
	Health json.RawMessage `json:"health,omitempty"`
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
		m.events.record(ctx, "task.create", store.TargetTask, target, err, "“"+in.Title+"”")
	}()
	row, err := m.checkTaskInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	row.CreatedBy = by
	row.Status = store.TaskStopped
	err = m.st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := store.CreateTask(ctx, tx, row); err != nil {
			return err
		}
		_, err := syncTaskMembers(ctx, tx, row.ID, row.Selector)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("master: create task: %w", err)
	}
	m.log.Info("task created", "task", row.ID, "title", row.Title, "executors", row.Executors, "by", by)
	return m.GetTask(ctx, row.ID)
}

// UpdateTask replaces a stopped task's definition.
func (m *Master) UpdateTask(ctx context.Context, id string, in TaskInput) (_ *Task, err error) {
	defer func() { m.events.record(ctx, "task.edit", store.TargetTask, id, err, "“"+in.Title+"”") }()
	defer m.locks.lock("task:" + id)()
	cur, err := store.GetTask(ctx, m.st.DB, id)
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	if !TaskAllows(cur.Status, TaskEdit) {
		return nil, Errorf(KindState, "task %s is %s; stop it before editing", id, cur.Status)
	}
	in.ID = id
	// Secrets are shown masked; an edit that sends the mask back keeps them,
	// unless the URL now points to another host.
	var stored protocol.TaskDef
	if json.Unmarshal([]byte(cur.Spec), &stored) == nil {
		if err := keepSecretsForSameHost(&in.TaskDef, &stored); err != nil {
			return nil, err
		}
	}
	row, err := m.checkTaskInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	err = m.st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := store.UpdateTask(ctx, tx, row); err != nil {
			return err
		}
		// A stopped task runs nowhere: its members change with no push.
		if _, err := syncTaskMembers(ctx, tx, id, row.Selector); err != nil {
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
		in.Timeout = protocol.Duration(m.settings.defaultTimeout())
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
	in.Selector = strings.TrimSpace(in.Selector)
	if in.Selector != "" {
		sel, err := protocol.ParseSelector(in.Selector)
		switch {
		case err != nil:
			fe["selector"] = err.Error()
		case sel.Empty():
			in.Selector = ""
		default:
			in.Selector = sel.String() // one spelling, so equal selectors compare equal
		}
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
	shell := in.Type == protocol.TaskShell
	if len(in.Executors) == 0 && in.Selector == "" && fe["executors"] == "" && fe["selector"] == "" {
		var running []store.Node
		for _, n := range nodes {
			if n.Type == store.TypeWorker && n.Status == store.StatusRunning {
				running = append(running, n)
			}
		}
		if shell {
			// Only workers that run shell tasks may get one.
			allows := m.shellAllowed(ctx, running)
			kept := running[:0:0]
			for _, n := range running {
				if allows[n.Name] != shellRefused {
					kept = append(kept, n)
				}
			}
			if len(kept) == 0 && len(running) > 0 {
				fe["executors"] = "no running worker allows shell tasks (" + strings.Join(nodeNames(running), ", ") +
					" " + wasWere(len(running)) + " started without --allow-shell): start one with --allow-shell"
			}
			running = kept
		}
		var candidates []Candidate
		for _, n := range running {
			candidates = append(candidates, Candidate{Name: n.Name, Weight: n.Priority})
		}
		for _, c := range PickWeightedN(candidates, 2, m.cfg.RandN) {
			in.Executors = append(in.Executors, c.Name)
		}
		sort.Strings(in.Executors)
		if len(in.Executors) == 0 && fe["executors"] == "" {
			fe["executors"] = "no running worker to assign: name the executors, or connect and enable a worker first"
		}
	} else if shell && fe["executors"] == "" && len(in.Executors) > 0 {
		// A shell task none of whose executors runs shell could never run:
		// refuse it now, naming them, rather than at Start.
		var execs []store.Node
		for _, e := range in.Executors {
			execs = append(execs, byName[e])
		}
		allows := m.shellAllowed(ctx, execs)
		// Refused only when each one says no: one that is down (or older)
		// may run shell, and is asked again at Start.
		var refused []string
		for _, e := range in.Executors {
			if allows[e] == shellRefused {
				refused = append(refused, e)
			}
		}
		if len(refused) == len(in.Executors) {
			which := "it"
			if len(refused) > 1 {
				which = "one of them"
			}
			fe["executors"] = "no executor allows shell tasks: " + strings.Join(refused, ", ") +
				" " + wasWere(len(refused)) + " started without --allow-shell; restart " + which + " with --allow-shell or choose a worker that was"
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
		Children: string(children), Executors: in.Executors, Selector: in.Selector}, nil
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

// What a worker said about shell tasks when asked (its /health).
const (
	shellUnknown = iota // not asked (offline), no answer, or an older worker
	shellAllowed
	shellRefused
)

// shellAllowed asks the nodes that are not offline, at once, whether they
// run shell tasks (started with --allow-shell). The probes are bounded by the
// health timeout; a node that does not answer is shellUnknown.
func (m *Master) shellAllowed(ctx context.Context, nodes []store.Node) map[string]int {
	out := make(map[string]int, len(nodes))
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, 16)
	)
	timeout := m.HealthConfig().Timeout
	for i := range nodes {
		n := &nodes[i]
		if n.Name == "" || n.Type != store.TypeWorker || n.Status == store.StatusOffline {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			h, err := m.client.Health(ctx, n, timeout)
			v := shellUnknown
			if err == nil && h.AllowShell != nil {
				v = shellRefused
				if *h.AllowShell {
					v = shellAllowed
				}
			}
			mu.Lock()
			out[n.Name] = v
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func nodeNames(nodes []store.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// wasWere is "was" for one, "were" for more.
func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
