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
	"strconv"
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
	// Project names the project the task belongs to: "" is the default
	// project on creation and the task's own on an edit.
	Project string `json:"project,omitempty"`
	// projectID is the resolved project, for rules per project (keys).
	projectID int64
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
	// Version is the version an edit started from (Task.Version as read):
	// a save over a newer one is refused, naming who saved it. 0: no
	// check. A creation ignores it.
	Version int `json:"version,omitempty"`
	// Note says why, for the version the save makes (at most 1,000
	// characters).
	Note string `json:"note,omitempty"`
}

// Create validates and stores a new, stopped task. Without executors it
// gets two running workers picked by priority weight.
func (tk *Tasks) Create(ctx context.Context, in TaskInput, by string) (_ *Task, err error) {
	in.ID = uuid.NewString()
	defer func() {
		target := in.ID
		if err != nil {
			target = "" // no task was made
		}
		tk.m.events.record(ctx, "task.create", store.TargetTask, target, err, "“"+in.Title+"”")
	}()
	p, err := tk.m.projects.project(ctx, strings.TrimSpace(in.Project))
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, p.ID)
	if err := authorize(ctx, p.ID, ActEdit, projectNotFound(p.Name)); err != nil {
		return nil, err
	}
	in.projectID = p.ID
	row, err := tk.checkTaskInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	row.ProjectID = p.ID
	row.CreatedBy = by
	row.Status = store.TaskStopped
	// Run again when a concurrent write won a lock (MariaDB deadlock,
	// Galera conflict, SQLite busy): the transaction was rolled back whole.
	err = store.RetryTx(ctx, tk.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		if err := store.CreateTask(ctx, tx, row); err != nil {
			return err
		}
		if err := tk.writeVersion(ctx, tx, nil, row, in.Note); err != nil {
			return err
		}
		_, err := syncTaskMembers(ctx, tx, row.ID, row.Selector)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("master: create task: %w", err)
	}
	tk.m.log.Info("task created", "task", row.ID, "title", row.Title, "executors", row.Executors, "by", by)
	return tk.Get(ctx, row.ID)
}

// Update replaces a stopped task's definition. An input without a key
// keeps the task's key (the console's form does not show it).
func (tk *Tasks) Update(ctx context.Context, id string, in TaskInput) (_ *Task, err error) {
	defer func() { tk.m.events.record(ctx, "task.edit", store.TargetTask, id, err, "“"+in.Title+"”") }()
	defer tk.m.locks.lock("task:" + id)()
	cur, err := store.GetTask(ctx, tk.m.st.DB, id)
	if err != nil {
		return nil, mapTaskErr(err, id)
	}
	ctx = withEventProject(ctx, cur.ProjectID)
	if err := authorize(ctx, cur.ProjectID, ActEdit, taskNotFound(id)); err != nil {
		return nil, err
	}
	// A task moves to another project only for one who may edit in both.
	in.projectID = cur.ProjectID
	if name := strings.TrimSpace(in.Project); name != "" {
		p, err := tk.m.projects.project(ctx, name)
		if err != nil {
			return nil, err
		}
		if err := authorize(ctx, p.ID, ActEdit, projectNotFound(name)); err != nil {
			return nil, err
		}
		in.projectID = p.ID
	}
	if err := prepareEdit(cur, &in, true); err != nil {
		return nil, err
	}
	if err := tk.conflictIfMoved(ctx, cur, in.Version); err != nil {
		return nil, err
	}
	row, err := tk.checkTaskInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	row.ProjectID = in.projectID
	if cur.Status != store.TaskStopped {
		return tk.updateLive(ctx, cur, row, in.Note)
	}
	if err := tk.writeEdit(ctx, cur, row, in.Note, false); err != nil {
		if errors.Is(err, store.ErrConflict) && in.Version != 0 {
			// Another master saved it between the read and the write:
			// say who and when, as for an edit that started from an
			// older version.
			if now, gerr := store.GetTask(ctx, tk.m.st.DB, id); gerr == nil {
				if cerr := tk.conflictIfMoved(ctx, now, in.Version); cerr != nil {
					return nil, cerr
				}
			}
		}
		return nil, mapTaskErr(err, id)
	}
	tk.m.log.Info("task edited", "task", id, "version", row.Version)
	return tk.Get(ctx, id)
}

// writeEdit stores row over cur as the version after cur's, while the
// task is still in cur's status and version (the update is conditional on
// both), with its selected members, the run grants of the executors it
// leaves and the version's record. undo puts cur back over row instead
// (row is the edit a failed live edit wrote): cur's version number again,
// row's record deleted.
func (tk *Tasks) writeEdit(ctx context.Context, cur, row *store.Task, note string, undo bool) error {
	row.Status = cur.Status
	if !undo {
		row.Version = cur.Version + 1
	}
	return store.RetryTx(ctx, tk.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		if undo {
			if err := store.UpdateTask(ctx, tx, row, cur.Version); err != nil {
				return err
			}
			if err := store.DeleteTaskVersion(ctx, tx, row.ID, cur.Version); err != nil {
				return err
			}
		} else {
			if err := store.UpdateTask(ctx, tx, row, cur.Version); err != nil {
				return err
			}
			if err := tk.writeVersion(ctx, tx, cur, row, note); err != nil {
				return err
			}
		}
		// The members change here with no push: a stopped task runs nowhere,
		// and a live edit pushes the whole task itself (updateLive).
		if _, err := syncTaskMembers(ctx, tx, row.ID, row.Selector); err != nil {
			return err
		}
		// Runs of a former executor may still be on their way: keep accepting them.
		for _, e := range cur.Executors {
			if !slices.Contains(row.Executors, e) {
				if err := store.AddRunGrant(ctx, tx, row.ID, e); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// updateLive edits a running or paused task in place, as one step for its
// executors: the new definition is stored, then pushed to every running
// executor (leaving executors stop it, joining ones start it); when one
// fails, those that switched go back to the previous definition, the stored
// task too, and the error names the node. A worker replaces a task's job
// between fires: fires before the switch run the previous definition, fires
// after it the new one, and a run in progress finishes with the one it
// started with. The caller holds the task's lock.
func (tk *Tasks) updateLive(ctx context.Context, cur, row *store.Task, note string) (*Task, error) {
	id := cur.ID
	before, err := tk.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := tk.writeEdit(ctx, cur, row, note, false); err != nil {
		return nil, mapTaskErr(err, id)
	}
	after, err := tk.Get(ctx, id)
	if err == nil {
		err = tk.switchLive(ctx, before, after)
	}
	if err != nil {
		// Put the stored task back as it was; the executors already are.
		back := *cur
		uctx, cancel := tk.m.life.detached(ctx, tk.m.cfg.CallTimeout+time.Second)
		defer cancel()
		if rerr := tk.writeEdit(uctx, row, &back, "", true); rerr != nil {
			tk.m.log.Error("rollback of a live edit failed: the stored task is the new definition", "task", id, "err", rerr)
		}
		return nil, err
	}
	tk.m.log.Info("task edited while "+cur.Status.String(), "task", id)
	return after, nil
}

// prepareEdit checks that task cur may be edited (stopped, or with live
// running or paused too) and gives
// the edit in what it keeps from cur: the key when it sends none (the
// console's form carries none), the secrets it sends back masked (unless
// the URL now points to another host), the alignment.
func prepareEdit(cur *store.Task, in *TaskInput, live bool) error {
	if !TaskAllows(cur.Status, TaskEdit) || (!live && cur.Status != store.TaskStopped) {
		return Errorf(KindState, "task %s is %s; stop it before editing", cur.ID, cur.Status)
	}
	in.ID = cur.ID
	var stored protocol.TaskDef
	if json.Unmarshal([]byte(cur.Spec), &stored) != nil {
		return nil
	}
	if strings.TrimSpace(in.Key) == "" {
		in.Key = stored.Key
	}
	if err := keepSecretsForSameHost(&in.TaskDef, &stored); err != nil {
		return err
	}
	keepAlign(&in.TaskDef, &stored)
	return nil
}

// keepAlign gives an edit of an interval task that names no alignment the
// stored one, epoch for a task stored before alignments existed: a form or
// script that does not know the field never moves a task's fire times.
func keepAlign(in, stored *protocol.TaskDef) {
	if in.Schedule.Kind != protocol.ScheduleInterval || strings.TrimSpace(in.Schedule.Align) != "" ||
		stored.Schedule.Kind != protocol.ScheduleInterval {
		return
	}
	in.Schedule.Align = stored.Schedule.Align
	if in.Schedule.Align == "" {
		in.Schedule.Align = protocol.AlignEpoch
	}
}

// taskCheck is what checking task inputs reads besides the input: the nodes,
// what workers said about shell tasks, the users, the children graph and the
// task keys. checkTaskInput reads them for one input; Apply reads them once
// for a whole document and overlays the document's own tasks.
type taskCheck struct {
	// project is the project whose keys a key must differ from, pools the
	// pools it may run on.
	project int64
	pools   *poolRule
	nodes   []store.Node
	byName  map[string]store.Node
	shell   map[string]*protocol.HealthResponse // by node name, probed when first needed; nil: no answer
	users   map[string]bool                     // keepers by project and name, looked up when first needed
	// graph holds the children of every task that is not deleted, by id;
	// nil until a task with children is checked.
	graph map[string][]string
	// keys maps each task key to its task's id; nil: looked up key by key.
	keys map[string]string
}

// newTaskCheck reads the nodes; the rest is read when needed.
func (tk *Tasks) newTaskCheck(ctx context.Context) (*taskCheck, error) {
	nodes, err := store.ListNodes(ctx, tk.m.st.DB)
	if err != nil {
		return nil, err
	}
	chk := &taskCheck{nodes: nodes, byName: map[string]store.Node{}, shell: map[string]*protocol.HealthResponse{}, users: map[string]bool{}}
	for _, n := range nodes {
		chk.byName[n.Name] = n
	}
	return chk, nil
}

// typeOf says, for each of nodes, whether it runs tasks of typ: asked at
// most once per check (typeAllowed).
func (tk *Tasks) typeOf(ctx context.Context, chk *taskCheck, nodes []store.Node, typ string) map[string]int {
	var ask []store.Node
	for _, n := range nodes {
		if _, ok := chk.shell[n.Name]; !ok {
			ask = append(ask, n)
		}
	}
	for name, h := range tk.healthOf(ctx, ask) {
		chk.shell[name] = h
	}
	out := make(map[string]int, len(nodes))
	for _, n := range nodes {
		out[n.Name] = typeAllowed(chk.shell[n.Name], typ)
	}
	return out
}

// loadGraph reads the children of every task that is not deleted.
func (tk *Tasks) loadGraph(ctx context.Context, chk *taskCheck) error {
	if chk.graph != nil {
		return nil
	}
	var projects []int64
	if chk.project != 0 {
		projects = []int64{chk.project}
	}
	all, err := store.TaskChildren(ctx, tk.m.st.DB, projects)
	if err != nil {
		return err
	}
	chk.graph = make(map[string][]string, len(all))
	for id, js := range all {
		var ch []string
		_ = json.Unmarshal([]byte(js), &ch)
		chk.graph[id] = ch
	}
	return nil
}

// keyOwner returns the id of the task that holds key other than id, if any.
func (tk *Tasks) keyOwner(ctx context.Context, chk *taskCheck, key, id string) (string, error) {
	if chk.keys != nil {
		if owner, ok := chk.keys[key]; ok && owner != id {
			return owner, nil
		}
		return "", nil
	}
	specs, err := store.TaskSpecsWithKey(ctx, tk.m.st.DB, chk.project, key)
	if err != nil {
		return "", err
	}
	for other, spec := range specs {
		var d protocol.TaskDef
		if other != id && json.Unmarshal([]byte(spec), &d) == nil && d.Key == key {
			return other, nil
		}
	}
	return "", nil
}

// normalizeTaskInput fills the defaults of a task input and writes each of
// its fields one way (trimmed text, one spelling of the selector, lists
// without repeats), so two inputs meaning the same task compare equal.
func (tk *Tasks) normalizeTaskInput(in *TaskInput) {
	if in.Timeout == 0 {
		in.Timeout = protocol.Duration(tk.m.settings.defaultTimeout())
	}
	in.Normalize()
	if in.Schedule.Kind == protocol.ScheduleInterval && in.Schedule.Align == "" {
		// A new interval task spreads unless it asks for the epoch; an
		// edit that names no alignment has been given the stored one
		// (keepAlign) before this.
		in.Schedule.Align = protocol.AlignSpread
	}
	if sel, err := canonicalSelector(in.Selector); err == nil {
		in.Selector = sel
	}
	in.Executors = dedupe(in.Executors)
	in.Keepers = dedupe(in.Keepers)
	in.Children = dedupe(in.Children)
}

// checkTaskInput validates everything about a task input and builds its row.
func (tk *Tasks) checkTaskInput(ctx context.Context, in *TaskInput) (*store.Task, error) {
	chk, err := tk.newTaskCheck(ctx)
	if err != nil {
		return nil, err
	}
	if err := tk.checkInProject(ctx, chk, in.projectID); err != nil {
		return nil, err
	}
	tk.normalizeTaskInput(in)
	return tk.checkTaskInputWith(ctx, in, chk)
}

// checkInProject makes chk check tasks of the project: its keys, its pools.
func (tk *Tasks) checkInProject(ctx context.Context, chk *taskCheck, project int64) error {
	if project == 0 {
		project = store.DefaultProjectID
	}
	p, err := tk.m.projects.projectByID(ctx, project)
	if err != nil {
		return err
	}
	chk.project, chk.pools = p.ID, poolRuleOf(p)
	return nil
}

// checkTaskInputWith is checkTaskInput for a normalized input, against chk.
func (tk *Tasks) checkTaskInputWith(ctx context.Context, in *TaskInput, chk *taskCheck) (*store.Task, error) {
	fe := protocol.FieldErrors{}
	if err := in.Validate(time.Now()); err != nil && !Merge(fe, err) {
		return nil, err
	}
	in.Note = strings.TrimSpace(in.Note)
	if msg := noteProblem(in.Note); msg != "" {
		fe["note"] = msg
	}
	if in.Key != "" && fe["key"] == "" {
		owner, err := tk.keyOwner(ctx, chk, in.Key, in.ID)
		if err != nil {
			return nil, err
		}
		if owner != "" {
			fe["key"] = fmt.Sprintf("%q is the key of task %s already", in.Key, owner)
		}
	}
	if err := tk.m.connections.checkTaskConnection(ctx, fe, chk.project, &in.TaskDef); err != nil {
		return nil, err
	}
	nodes, byName := chk.nodes, chk.byName
	if _, err := canonicalSelector(in.Selector); err != nil {
		fe["selector"] = err.Error()
	}
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
	if chk.pools != nil {
		chk.pools.check(fe, in.Selector, in.Executors, byName)
	}
	// Shell and the types beyond HTTP run only on workers that allow them.
	gated := in.Type == protocol.TaskShell || protocol.IsGatedType(in.Type)
	if len(in.Executors) == 0 && in.Selector == "" && fe["executors"] == "" && fe["selector"] == "" {
		var running []store.Node
		for _, n := range nodes {
			if n.Type == store.TypeWorker && n.Status == store.StatusRunning && (chk.pools == nil || chk.pools.admits(NodeLabels(&n))) {
				running = append(running, n)
			}
		}
		if gated {
			// Only workers that run the type may get one.
			allows := tk.typeOf(ctx, chk, running, in.Type)
			kept := running[:0:0]
			for _, n := range running {
				if allows[n.Name] != refusesType {
					kept = append(kept, n)
				}
			}
			if len(kept) == 0 && len(running) > 0 {
				flag := typeFlag(in.Type)
				fe["executors"] = "no running worker allows " + in.Type + " tasks (" + strings.Join(nodeNames(running), ", ") +
					" " + wasWere(len(running)) + " started without " + flag + "): start one with " + flag
			}
			running = kept
		}
		var candidates []Candidate
		for _, n := range running {
			candidates = append(candidates, Candidate{Name: n.Name, Weight: n.Priority})
		}
		for _, c := range PickWeightedN(candidates, 2, tk.m.cfg.RandN) {
			in.Executors = append(in.Executors, c.Name)
		}
		sort.Strings(in.Executors)
		if len(in.Executors) == 0 && fe["executors"] == "" {
			fe["executors"] = "no running worker to assign: name the executors, or connect and enable a worker first"
			if chk.pools != nil && !chk.pools.all {
				fe["executors"] = fmt.Sprintf("no running worker in what project %s may run on (%s): name the executors, or start a worker in one of those pools", chk.pools.project, chk.pools.names())
			}
		}
	} else if gated && fe["executors"] == "" && len(in.Executors) > 0 {
		// A shell (or gated type) task none of whose executors runs it
		// could never run: refuse it now, naming them, rather than at Start.
		var execs []store.Node
		for _, e := range in.Executors {
			execs = append(execs, byName[e])
		}
		allows := tk.typeOf(ctx, chk, execs, in.Type)
		// Refused only when each one says no: one that is down (or older)
		// may run shell, and is asked again at Start.
		var refused []string
		for _, e := range in.Executors {
			if allows[e] == refusesType {
				refused = append(refused, e)
			}
		}
		if len(refused) == len(in.Executors) {
			which := "it"
			if len(refused) > 1 {
				which = "one of them"
			}
			flag := typeFlag(in.Type)
			fe["executors"] = "no executor allows " + in.Type + " tasks: " + strings.Join(refused, ", ") +
				" " + wasWere(len(refused)) + " started without " + flag + "; restart " + which + " with " + flag + " or choose a worker that was"
		}
	}
	for _, k := range in.Keepers {
		key := strconv.FormatInt(chk.project, 10) + "\x00" + k
		known, seen := chk.users[key]
		if !seen {
			var err error
			if known, err = keeperReads(ctx, tk.m.st.DB, k, chk.project); err != nil {
				return nil, err
			}
			chk.users[key] = known
		}
		if !known {
			fe["keepers"] = keeperRefusal(k)
		}
	}
	if len(in.Children) > 0 {
		if err := tk.loadGraph(ctx, chk); err != nil {
			return nil, err
		}
		graph := chk.graph
		mine, had := graph[in.ID]
		graph[in.ID] = in.Children
		for _, c := range in.Children {
			if c == in.ID {
				fe["children"] = "a task cannot be its own child"
				break
			}
			if _, ok := graph[c]; !ok {
				fe["children"] = fmt.Sprintf("unknown task %q", c)
				break
			}
		}
		if fe["children"] == "" {
			if cyc := findCycle(graph, in.ID); cyc != nil {
				fe["children"] = "these children form a cycle: " + strings.Join(cyc, " → ")
			}
		}
		if had { // the graph stays what chk was given: the caller decides what is stored
			graph[in.ID] = mine
		} else {
			delete(graph, in.ID)
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

// What a worker said about a task type when asked (its /health).
const (
	runsUnknown = iota // not asked (offline), no answer, or an older worker
	runsType
	refusesType
)

// typeFlag is the worker flag that allows tasks of typ.
func typeFlag(typ string) string {
	if typ == protocol.TaskShell {
		return "--allow-shell"
	}
	return "--allow-types " + typ
}

// typeAllowed reads whether a worker that answered h runs tasks of typ.
// A worker too old to say whether it runs shell is unknown for shell, and
// refused for the types beyond it, which it cannot run.
func typeAllowed(h *protocol.HealthResponse, typ string) int {
	switch {
	case h == nil:
		return runsUnknown
	case typ == protocol.TaskShell:
		if h.AllowShell == nil {
			return runsUnknown
		}
		if *h.AllowShell {
			return runsType
		}
		return refusesType
	case protocol.IsGatedType(typ):
		if slices.Contains(h.AllowTypes, typ) {
			return runsType
		}
		return refusesType
	}
	return runsType
}

// healthOf asks the nodes that are not offline, at once, for their /health
// (which says whether they run shell and which types beyond it). The
// probes are bounded by the health timeout; a node that does not answer is
// nil.
func (tk *Tasks) healthOf(ctx context.Context, nodes []store.Node) map[string]*protocol.HealthResponse {
	out := make(map[string]*protocol.HealthResponse, len(nodes))
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, 16)
	)
	timeout := tk.m.HealthConfig().Timeout
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
			h, err := tk.m.client.Health(ctx, n, timeout)
			mu.Lock()
			if err == nil {
				out[n.Name] = &h
			} else {
				out[n.Name] = nil
			}
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
