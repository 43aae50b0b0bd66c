package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// ApplyOptions says how Apply runs.
type ApplyOptions struct {
	// DryRun plans and changes nothing.
	DryRun bool
	// Prune deletes the tasks the document does not hold and, when it has
	// a workflows section, the workflows it does not hold.
	Prune bool
	// By is who applies: the creator of new tasks.
	By string
	// Project is the project the document is applied to ("": default):
	// its tasks and workflows are matched, created and pruned there only.
	Project string
}

// What a plan does to a task or a workflow.
const (
	PlanCreate    = "create"
	PlanUpdate    = "update"
	PlanUnchanged = "unchanged"
	PlanDelete    = "delete"
)

// Plan is what Apply does, or did, to make the master match a document.
type Plan struct {
	DryRun bool `json:"dry_run"`
	Prune  bool `json:"prune"`
	// Changes lists a change per task and per workflow: the document's
	// tasks, children before their parents, then its workflows, then the
	// deletions (workflows first). The counts count both.
	Changes   []PlanChange `json:"changes"`
	Create    int          `json:"create"`
	Update    int          `json:"update"`
	Unchanged int          `json:"unchanged"`
	Delete    int          `json:"delete"`
	// Settings is the change of the cluster's settings, when the document
	// has a settings section.
	Settings *PlanSettings `json:"settings,omitempty"`
	// Applied says every change was made (false for a dry run).
	Applied bool `json:"applied"`
	// Error says which change failed: the ones before it were made (Done),
	// the ones after it were not.
	Error string `json:"error,omitempty"`
}

// PlanSettings is the change of the cluster's settings: made first, before
// the tasks' changes, as one save.
type PlanSettings struct {
	// Fields names the settings whose values change (never the values:
	// some are secrets).
	Fields []string `json:"fields"`
	Done   bool     `json:"done"`
	Error  string   `json:"error,omitempty"`
	change func(*Settings)
}

// PlanChange is the change of one task or workflow.
type PlanChange struct {
	Action string `json:"action"`
	// Kind is PlanWorkflow for a workflow's change, empty for a task's.
	Kind  string `json:"kind,omitempty"`
	Key   string `json:"key,omitempty"`
	Title string `json:"title"`
	// ID is the task's (or workflow's) id; one a dry run would create has
	// none yet.
	ID string `json:"id,omitempty"`
	// Fields names what an update changes (never the values: some are
	// secrets).
	Fields []string `json:"fields,omitempty"`
	// State is the task's state after the change, "stopped → running" when
	// the change moves it (none for a workflow).
	State string `json:"state,omitempty"`
	// Done says the change was made (an unchanged task is done at once).
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// applyStep is a change with what making it needs.
type applyStep struct {
	change *PlanChange
	in     TaskInput // the desired task; Children hold ids, placeholders for new tasks
	from   string    // the state now ("" for a new task)
	to     string    // the desired state
	def    bool      // the definition changes
	wf     *wfApply  // set for a workflow's change, which the fields above are not
}

// placeholder stands for the id of a task the apply creates.
func placeholder(i int) string { return "new:" + strconv.Itoa(i) }

// Apply makes the master's tasks match doc: it creates the tasks doc holds
// that the master lacks, updates those that differ, leaves the others alone
// and, with Prune, deletes the tasks doc does not hold. A task of the
// document is the master's task with the same key or, without a key, the
// same title (a keyed task of the document also takes over the one task of
// its title that has no key). The whole document is checked first, every
// task through the checks of Tasks.Create and Tasks.Update, and a refusal names
// every task and field at fault with nothing changed. A running or paused
// task whose definition changes is edited in place, every executor switched
// at once (Tasks.Update), then brought to its state. The new tasks are created first, in bulk
// (one transaction per chunk, one call per worker to start them), then the
// other changes are made in order. A change that fails (a worker refuses a
// start) stops the apply there: the plan says what was done (Done per
// change), and the error which change failed.
//
// The document's workflows are matched the same way (key, else title),
// checked with its tasks before anything changes (each step's task named by
// key or title, resolved among the tasks as the apply leaves them), and
// created or updated through the workflow domain after the tasks and before
// any deletion; prune deletes the project's other workflows only when the
// document has a workflows section.
func (m *Master) Apply(ctx context.Context, doc *Document, opts ApplyOptions) (*Plan, error) {
	defer m.locks.lock("apply")()
	ctx = withVia(ctx, ViaApply)
	plan, steps, err := m.planApply(ctx, doc, opts)
	if err != nil {
		return nil, err
	}
	if opts.DryRun {
		return plan, nil
	}
	fail := func(s *applyStep, err error) (*Plan, error) {
		msg := Message(err)
		if KindOf(err) == 0 {
			msg = "the master failed (its log says why)" // a Go error chain stays in the log
		}
		s.change.Error = msg
		plan.Error = fmt.Sprintf("%s %s: %s", s.change.Action, changeName(s.change), msg)
		m.log.Warn("apply stopped", "change", s.change.Action, "kind", s.change.Kind, "id", s.change.ID, "err", err)
		return plan, err
	}
	// The settings first (a task's default HTTP timeout may depend on
	// them), then the new tasks, batched (see applyCreates), then the
	// others in order: the workflows once their tasks exist, and before
	// the deletions, so no workflow names a task already gone.
	if ps := plan.Settings; ps != nil {
		if err := m.ChangeSettings(ctx, ps.change); err != nil {
			msg := Message(err)
			if KindOf(err) == 0 {
				msg = "the master failed (its log says why)"
			}
			ps.Error, plan.Error = msg, "settings: "+msg
			m.log.Warn("apply stopped", "change", "settings", "err", err)
			return plan, err
		}
		ps.Done = true
	}
	created := map[string]string{} // placeholder -> id
	if s, err := m.applyCreates(ctx, steps, created, opts.By); err != nil {
		return fail(s, err)
	}
	for _, s := range steps {
		if s.change.Action == PlanCreate && s.wf == nil {
			continue
		}
		if err := m.applyStep(ctx, s, created, opts.By); err != nil {
			return fail(s, err)
		}
		s.change.Done = true
	}
	plan.Applied = true
	m.log.Info("document applied", "create", plan.Create, "update", plan.Update, "unchanged", plan.Unchanged,
		"delete", plan.Delete, "by", opts.By)
	return plan, nil
}

func changeName(c *PlanChange) string {
	kind := ""
	if c.Kind != "" {
		kind = c.Kind + " "
	}
	if c.Key != "" {
		return kind + "key " + c.Key
	}
	return kind + "“" + c.Title + "”"
}

// applyStep makes one change.
func (m *Master) applyStep(ctx context.Context, s *applyStep, created map[string]string, by string) error {
	if s.wf != nil {
		return m.applyWorkflow(ctx, s, created)
	}
	c := s.change
	switch c.Action {
	case PlanUnchanged:
		return nil
	case PlanDelete:
		return m.tasks.Delete(ctx, c.ID)
	}
	in := s.in
	in.Children = slices.Clone(in.Children)
	for i, ch := range in.Children {
		if id, ok := created[ch]; ok {
			in.Children[i] = id
		}
	}
	from := s.from
	if c.Action == PlanCreate {
		ph := in.ID
		in.ID = ""
		t, err := m.tasks.Create(ctx, in, by)
		if err != nil {
			return err
		}
		created[ph], c.ID, from = t.ID, t.ID, StateStopped
	} else if s.def {
		// A running or paused task is edited in place (Tasks.Update).
		if _, err := m.tasks.Update(ctx, c.ID, in); err != nil {
			return err
		}
	}
	return m.tasks.reachState(ctx, c.ID, from, s.to)
}

// applyCreates makes the creations of steps as one bulk save (its ids
// chosen first, so that a new parent names its new children) and brings
// the new tasks to their state in bulk: a transaction per chunk and one
// call per worker instead of a few per task. It returns the first step
// that failed, in the order of steps, and why.
func (m *Master) applyCreates(ctx context.Context, steps []*applyStep, created map[string]string, by string) (*applyStep, error) {
	var creates []*applyStep
	for _, s := range steps {
		if s.change.Action == PlanCreate && s.wf == nil {
			creates = append(creates, s)
			created[s.in.ID] = uuid.NewString()
		}
	}
	if len(creates) == 0 {
		return nil, nil
	}
	inputs := make([]TaskInput, len(creates))
	yes := make([]bool, len(creates))
	for i, s := range creates {
		in := s.in
		in.ID, yes[i] = created[in.ID], true
		in.Children = slices.Clone(in.Children)
		for j, ch := range in.Children {
			if id, ok := created[ch]; ok {
				in.Children[j] = id
			}
		}
		inputs[i] = in
	}
	saved, err := m.tasks.saveTasks(ctx, inputs, yes, by)
	if err != nil {
		return creates[0], err
	}
	failed := map[*applyStep]error{}
	var start, pause []string
	byID := map[string]*applyStep{}
	for i, s := range creates {
		r := saved[i]
		if !r.OK {
			failed[s] = Errorf(KindState, "%s", r.Error)
			continue
		}
		s.change.ID = r.ID
		byID[r.ID] = s
		if s.to != StateStopped {
			start = append(start, r.ID)
		}
		if s.to == StatePaused {
			pause = append(pause, r.ID)
		}
	}
	for _, step := range []struct {
		action string
		ids    []string
	}{{string(TaskStart), start}, {string(TaskPause), pause}} {
		for chunk := range slices.Chunk(step.ids, MaxBulkTasks) {
			results, err := m.tasks.Bulk(ctx, step.action, chunk)
			if err != nil {
				return byID[chunk[0]], err
			}
			for _, r := range results {
				if r.OK || failed[byID[r.ID]] != nil {
					continue
				}
				kind := KindWorker
				if r.Refused {
					kind = KindState
				}
				failed[byID[r.ID]] = Errorf(kind, "%s", r.Error)
			}
		}
	}
	var first *applyStep
	for _, s := range steps {
		if s.change.Action != PlanCreate || s.wf != nil {
			continue
		}
		if err := failed[s]; err != nil {
			s.change.Error = Message(err)
			if first == nil {
				first = s
			}
			continue
		}
		s.change.Done = true
	}
	if first != nil {
		return first, failed[first]
	}
	return nil, nil
}

// reachState moves a task from one state to another.
func (tk *Tasks) reachState(ctx context.Context, id, from, to string) error {
	var err error
	switch {
	case from == to:
	case to == StateStopped:
		_, err = tk.Stop(ctx, id)
	case from == StateStopped:
		if _, err = tk.Start(ctx, id); err == nil && to == StatePaused {
			_, err = tk.Pause(ctx, id)
		}
	case to == StatePaused:
		_, err = tk.Pause(ctx, id)
	default:
		_, err = tk.Resume(ctx, id)
	}
	return err
}

// planApply matches and checks the document and lists its changes in the
// order they are made.
func (m *Master) planApply(ctx context.Context, doc *Document, opts ApplyOptions) (*Plan, []*applyStep, error) {
	if len(doc.Tasks) > MaxDocumentTasks {
		return nil, nil, Errorf(KindTooLarge, "the document holds %d tasks: at most %d in one apply", len(doc.Tasks), MaxDocumentTasks)
	}
	proj, err := m.projects.project(ctx, strings.TrimSpace(opts.Project))
	if err != nil {
		return nil, nil, err
	}
	if err := authorize(ctx, proj.ID, ActEdit, projectNotFound(proj.Name)); err != nil {
		return nil, nil, err
	}
	fe := protocol.FieldErrors{}
	tasks := doc.Tasks
	keys, titles := map[string]int{}, map[string]int{}
	for i := range tasks {
		t := &tasks[i]
		t.Key, t.Title = strings.TrimSpace(t.Key), strings.TrimSpace(t.Title)
		t.State = strings.ToLower(strings.TrimSpace(t.State))
		name := docName(i, t)
		switch t.State {
		case "", StateRunning, StatePaused, StateStopped:
		default:
			fe[name+".state"] = fmt.Sprintf("%q is not running, paused or stopped", clipText(t.State, 40))
		}
		if t.ID != "" {
			fe[name+".id"] = "a document carries no ids: tasks are matched by key, or by title"
		}
		switch {
		case t.Key != "":
			if j, dup := keys[t.Key]; dup {
				fe[name+".key"] = fmt.Sprintf("tasks[%d] has this key too", j)
			}
			keys[t.Key] = i
		case t.Title == "":
			fe[name+".title"] = "is required"
		default:
			if j, dup := titles[t.Title]; dup {
				fe[name+".title"] = fmt.Sprintf("tasks[%d] has this title too: give them keys to tell them apart", j)
			}
			titles[t.Title] = i
		}
	}
	var settings *PlanSettings
	if doc.Settings != nil {
		if settings, err = m.planSettings(ctx, doc.Settings, fe); err != nil {
			return nil, nil, err
		}
	}

	// Match the document's tasks with the master's.
	all, err := m.tasks.allTasks(ctx, []int64{proj.ID})
	if err != nil {
		return nil, nil, err
	}
	byKey, byTitle := map[string][]*Task{}, map[string][]*Task{}
	for _, t := range all {
		if t.Key != "" {
			byKey[t.Key] = append(byKey[t.Key], t)
		} else {
			byTitle[t.Title] = append(byTitle[t.Title], t)
		}
	}
	ids := func(ts []*Task) string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.ID
		}
		return strings.Join(out, ", ")
	}
	cur := make([]*Task, len(tasks))
	claimed := map[string]int{}
	for i := range tasks {
		t := &tasks[i]
		name := docName(i, t)
		var found []*Task
		field := "title"
		if t.Key != "" {
			found, field = byKey[t.Key], "key"
		}
		if len(found) == 0 {
			found, field = byTitle[t.Title], "title"
		}
		switch {
		case len(found) > 1:
			fe[name+"."+field] = fmt.Sprintf("%d tasks of the master have this %s (%s): give them keys, or delete all but one",
				len(found), field, ids(found))
			continue
		case len(found) == 0:
			continue
		}
		if j, dup := claimed[found[0].ID]; dup {
			fe[name] = fmt.Sprintf("matches the same task of the master as tasks[%d] (%s)", j, found[0].ID)
			continue
		}
		claimed[found[0].ID] = i
		cur[i] = found[0]
	}
	idOf := make([]string, len(tasks))
	for i := range tasks {
		if cur[i] != nil {
			idOf[i] = cur[i].ID
		} else {
			idOf[i] = placeholder(i)
		}
	}
	// Children name other tasks of the document, by key or by title.
	children := make([][]string, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		for _, ref := range t.Children {
			ref = strings.TrimSpace(ref)
			j, ok := keys[ref]
			if !ok {
				j, ok = titles[ref]
			}
			if !ok {
				fe[docName(i, t)+".children"] = fmt.Sprintf("no task of the document has the key (or title) %q", clipText(ref, 60))
				continue
			}
			children[i] = append(children[i], idOf[j])
		}
	}
	if len(fe) > 0 {
		return nil, nil, documentInvalid(fe)
	}

	// Check every task that changes, against the master as it will be.
	chk, err := m.tasks.newTaskCheck(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := m.tasks.checkInProject(ctx, chk, proj.ID); err != nil {
		return nil, nil, err
	}
	if err := m.tasks.loadGraph(ctx, chk); err != nil {
		return nil, nil, err
	}
	chk.keys = map[string]string{}
	for _, t := range all {
		if _, kept := claimed[t.ID]; !kept && opts.Prune {
			delete(chk.graph, t.ID)
		} else if !kept && t.Key != "" {
			chk.keys[t.Key] = t.ID
		}
	}
	for i := range tasks {
		chk.graph[idOf[i]] = children[i]
		if tasks[i].Key != "" {
			chk.keys[tasks[i].Key] = idOf[i]
		}
	}
	plan := &Plan{DryRun: opts.DryRun, Prune: opts.Prune, Changes: []PlanChange{}, Settings: settings}
	steps := make([]*applyStep, len(tasks))
	names := map[string]string{} // id -> the document's name, for messages
	for i := range tasks {
		names[idOf[i]] = tasks[i].ident()
	}
	for i := range tasks {
		t := &tasks[i]
		name := docName(i, t)
		in := TaskInput{TaskDef: t.TaskDef, Executors: slices.Clone(t.Executors), Selector: t.Selector,
			Keepers: slices.Clone(t.Keepers), Children: children[i], Project: proj.Name, projectID: proj.ID}
		in.ID = idOf[i]
		if cur[i] != nil {
			keepAlign(&in.TaskDef, &cur[i].TaskDef)
		}
		m.tasks.normalizeTaskInput(&in)
		s := &applyStep{change: &PlanChange{Key: t.Key, Title: t.Title}, in: in, to: t.State}
		c := s.change
		if cur[i] == nil {
			c.Action, c.ID = PlanCreate, ""
			if s.to == "" {
				s.to = StateStopped
			}
			c.State = s.to
		} else {
			old := cur[i]
			c.ID, s.from = old.ID, old.Status.String()
			if s.to == "" {
				s.to = s.from
			}
			if err := keepSecretsForSameHost(&s.in.TaskDef, &old.TaskDef); err != nil {
				fe[name] = Message(err)
				continue
			}
			if len(s.in.Executors) == 0 && s.in.Selector == "" {
				// None named and no selector: the executors the master
				// picked when it created the task stay.
				s.in.Executors = slices.Clone(old.Executors)
			}
			c.Fields = diffTask(&s.in, old)
			s.def = len(c.Fields) > 0
			if s.from != s.to {
				c.Fields = append(c.Fields, "state")
				c.State = s.from + " → " + s.to
			} else {
				c.State = s.to
			}
			c.Action = PlanUpdate
			if len(c.Fields) == 0 {
				c.Action, c.Done = PlanUnchanged, true
			}
		}
		if c.Action != PlanUnchanged && (c.Action == PlanCreate || s.def) {
			probe := s.in
			probe.Executors = slices.Clone(s.in.Executors)
			if _, err := m.tasks.checkTaskInputWith(ctx, &probe, chk); err != nil {
				if !mergePrefixed(fe, name, err) {
					return nil, nil, err
				}
			}
		}
		steps[i] = s
	}
	// The workflows, their steps' tasks named as the project will have
	// them: the document's tasks, and the others unless prune deletes them.
	refs := &taskRefs{byKey: map[string][]*refTask{}, byTitle: map[string][]*refTask{}, byID: map[string]*refTask{}}
	for i := range tasks {
		routing := strings.ToLower(strings.TrimSpace(tasks[i].Routing))
		if steps[i] != nil {
			routing = steps[i].in.Routing
		}
		refs.add(&refTask{id: idOf[i], key: tasks[i].Key, title: tasks[i].Title, broadcast: routing == protocol.RoutingBroadcast})
	}
	pruned := map[string]*Task{}
	for _, t := range all {
		if _, kept := claimed[t.ID]; !kept {
			refs.add(&refTask{id: t.ID, key: t.Key, title: t.Title, broadcast: t.Routing == protocol.RoutingBroadcast, pruned: opts.Prune})
			if opts.Prune {
				pruned[t.ID] = t
			}
		}
	}
	wfSteps, wfDeletions, err := m.planWorkflows(ctx, doc, proj, opts.Prune, refs, pruned, fe)
	if err != nil {
		return nil, nil, err
	}
	if len(fe) > 0 {
		// Messages name tasks by id; a document's tasks by their names.
		var pairs []string
		for _, id := range slices.SortedFunc(maps.Keys(names), func(a, b string) int { return len(b) - len(a) }) {
			pairs = append(pairs, id, "“"+names[id]+"”") // longest first: new:12 before new:1
		}
		r := strings.NewReplacer(pairs...)
		for k, v := range fe {
			fe[k] = r.Replace(v)
		}
		return nil, nil, documentInvalid(fe)
	}

	// Children before their parents, so each parent names tasks that exist.
	var ordered []*applyStep
	state := make([]int, len(tasks)) // 0 new, 1 visiting, 2 done
	index := map[string]int{}
	for i := range tasks {
		index[idOf[i]] = i
	}
	var visit func(i int)
	visit = func(i int) {
		if state[i] != 0 {
			return // a cycle was refused above: 1 cannot be met again
		}
		state[i] = 1
		for _, c := range children[i] {
			if j, ok := index[c]; ok {
				visit(j)
			}
		}
		state[i] = 2
		ordered = append(ordered, steps[i])
	}
	for i := range tasks {
		visit(i)
	}
	ordered = append(ordered, wfSteps...)
	ordered = append(ordered, wfDeletions...)
	if opts.Prune {
		for _, t := range all {
			if _, kept := claimed[t.ID]; !kept {
				ordered = append(ordered, &applyStep{change: &PlanChange{Action: PlanDelete, Key: t.Key, Title: t.Title, ID: t.ID,
					State: t.Status.String()}})
			}
		}
	}
	plan.Changes = make([]PlanChange, len(ordered))
	for i, s := range ordered {
		plan.Changes[i] = *s.change
		s.change = &plan.Changes[i] // the apply marks what it did in the plan
		switch s.change.Action {
		case PlanCreate:
			plan.Create++
		case PlanUpdate:
			plan.Update++
		case PlanUnchanged:
			plan.Unchanged++
		case PlanDelete:
			plan.Delete++
		}
	}
	if opts.DryRun {
		for i := range plan.Changes {
			plan.Changes[i].Done = false
		}
	}
	return plan, ordered, nil
}

// mergePrefixed adds the field errors err carries to fe under name, or its
// sentence when it is another refusal; it reports false for an unexpected
// error (the database), which the caller returns as it is.
func mergePrefixed(fe protocol.FieldErrors, name string, err error) bool {
	var more protocol.FieldErrors
	if errors.As(err, &more) {
		for k, v := range more {
			fe[name+"."+k] = v
		}
		return true
	}
	if KindOf(err) == KindInvalid {
		fe[name] = Message(err)
		return true
	}
	return false
}

// canonDef is a definition as compared: no id, an empty list or map the
// same as none.
func canonDef(d protocol.TaskDef) protocol.TaskDef {
	d.ID = ""
	if len(d.Params) == 0 {
		d.Params = nil
	}
	if len(d.SecretParams) == 0 {
		d.SecretParams = nil
	}
	if d.HTTP != nil {
		h := *d.HTTP
		if len(h.Headers) == 0 {
			h.Headers = nil
		}
		if len(h.SecretHeaders) == 0 {
			h.SecretHeaders = nil
		}
		d.HTTP = &h
	}
	if d.Shell != nil {
		s := *d.Shell
		if len(s.Args) == 0 {
			s.Args = nil
		}
		if len(s.Env) == 0 {
			s.Env = nil
		}
		d.Shell = &s
	}
	return d
}

// diffTask names the fields in which the desired task differs from the
// stored one.
func diffTask(in *TaskInput, old *Task) []string {
	stored := old.TaskDef
	stored.Normalize()
	a, _ := json.Marshal(canonDef(in.TaskDef))
	b, _ := json.Marshal(canonDef(stored))
	var am, bm map[string]json.RawMessage
	_ = json.Unmarshal(a, &am)
	_ = json.Unmarshal(b, &bm)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(am)) {
		if !bytes.Equal(am[k], bm[k]) {
			out = append(out, k)
		}
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			out = append(out, k)
		}
	}
	sameSet := func(x, y []string) bool {
		x, y = slices.Clone(x), slices.Clone(y)
		slices.Sort(x)
		slices.Sort(y)
		return slices.Equal(slices.Compact(x), slices.Compact(y))
	}
	if !sameSet(in.Executors, old.Executors) {
		out = append(out, "executors")
	}
	if in.Selector != old.Selector {
		out = append(out, "selector")
	}
	if !sameSet(in.Keepers, old.Keepers) {
		out = append(out, "keepers")
	}
	if !sameSet(in.Children, old.Children) {
		out = append(out, "children")
	}
	return out
}

// planSettings checks a document's settings section as the settings API
// checks a PATCH: only cluster admins, each value parsed, the result
// validated whole over the stored settings. Problems go into fe under
// "settings."; the plan names the settings that change.
func (m *Master) planSettings(ctx context.Context, p *SettingsPatch, fe protocol.FieldErrors) (*PlanSettings, error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return nil, Errorf(KindForbidden, "forbidden: only a cluster admin applies the cluster's settings: leave the document's settings out")
	}
	change, bad := p.Change()
	for k, v := range bad {
		fe["settings."+k] = v
	}
	if len(bad) > 0 {
		return nil, nil
	}
	stored, err := m.StoredSettings(ctx)
	if err != nil {
		return nil, err
	}
	want := stored
	change(&want)
	for _, u := range []struct {
		field string
		in    *string
		was   string
	}{{"webhook_url", &want.WebhookURL, stored.WebhookURL}, {"public_url", &want.PublicURL, stored.PublicURL}} {
		if err := keepMaskedURLPassword(u.in, u.was); err != nil {
			fe["settings."+u.field] = err.Error()
		}
	}
	if err := want.Validate(); err != nil {
		var vfe protocol.FieldErrors
		if !errors.As(err, &vfe) {
			return nil, err
		}
		for k, v := range vfe {
			fe["settings."+k] = v
		}
		return nil, nil
	}
	changed := changedSettings(stored.pairs(), want.pairs())
	if changed == nil {
		changed = []string{}
	}
	return &PlanSettings{Fields: changed, change: change}, nil
}
