// Configuration as code for workflows: the document's workflows section,
// written by Export and made true by Apply. A step names its task as the
// document names tasks elsewhere, by key or, without one, by title; ids never
// travel.

package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// PlanWorkflow is the Kind of a plan's change of a workflow (a task's
// change has none).
const PlanWorkflow = "workflow"

// projectWorkflows reads every workflow of a project whoever asks may read:
// a document holds them all, as it holds all the project's tasks.
func (wf *Workflows) projectWorkflows(ctx context.Context, project int64) ([]*Workflow, error) {
	rows, err := store.ListWorkflows(ctx, wf.m.st.DB, restrictProjects(ctx, []int64{project}), math.MaxInt32)
	if err != nil {
		return nil, err
	}
	out := make([]*Workflow, 0, len(rows))
	for i := range rows {
		w, err := workflowOf(&rows[i], "")
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// workflowsNode writes workflows as a document's workflows section, in the
// order of their key (or title): each step's task by ident (tasks: the
// project's tasks by id, count: how many tasks share an ident), never an id
// unless its task no longer exists, which the workflow's comment says.
func workflowsNode(list []*Workflow, tasks map[string]*Task, ident func(*Task) string, count map[string]int) (*yaml.Node, error) {
	wident := func(w *Workflow) string {
		if w.Key != "" {
			return w.Key
		}
		return w.Title
	}
	slices.SortStableFunc(list, func(a, b *Workflow) int {
		if c := strings.Compare(wident(a), wident(b)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	same := map[string]int{}
	for _, w := range list {
		same[wident(w)]++
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, w := range list {
		notes := []string{fmt.Sprintf("version %d", w.Version)}
		if same[wident(w)] > 1 {
			notes = append(notes, fmt.Sprintf("%d workflows have this %s: give each its own key before applying",
				same[wident(w)], map[bool]string{true: "key", false: "title"}[w.Key != ""]))
		}
		d := DocWorkflow{WorkflowDef: w.WorkflowDef}
		d.Steps = slices.Clone(w.Steps)
		for i := range d.Steps {
			s := &d.Steps[i]
			t, ok := tasks[s.Task]
			switch {
			case !ok:
				notes = append(notes, fmt.Sprintf("step %s: task %s no longer exists: apply refuses the workflow until the step names a task", s.Name, s.Task))
			case count[ident(t)] > 1:
				notes = append(notes, fmt.Sprintf("step %s: %d tasks have this task's %s: give them keys before applying",
					s.Name, count[ident(t)], map[bool]string{true: "key", false: "title"}[t.Key != ""]))
				s.Task = ident(t)
			default:
				s.Task = ident(t)
			}
		}
		js, err := json.Marshal(&d)
		if err != nil {
			return nil, fmt.Errorf("master: export workflow %s: %w", w.ID, err)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		var v map[string]any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("master: export workflow %s: %w", w.ID, err)
		}
		node := objectNode(v, "workflow")
		node.HeadComment = strings.Join(notes, "\n")
		seq.Content = append(seq.Content, node)
	}
	if len(seq.Content) == 0 {
		seq.Style = yaml.FlowStyle
	}
	return seq, nil
}

// refTask is a task as a step of the document may name it: one of the
// document's (id a placeholder when the apply creates it) or one of the
// project's that the document leaves alone.
type refTask struct {
	id, key, title string
	broadcast      bool
	// pruned: the apply deletes it (prune), so no step may name it.
	pruned bool
}

// taskRefs finds the task a step names, in the project as the apply leaves
// it.
type taskRefs struct {
	byKey, byTitle map[string][]*refTask
	byID           map[string]*refTask
}

func (r *taskRefs) add(t *refTask) {
	if t.key != "" {
		r.byKey[t.key] = append(r.byKey[t.key], t)
	}
	r.byTitle[t.title] = append(r.byTitle[t.title], t)
	r.byID[t.id] = t
}

// resolve finds the task ref names: by key; else by title, the task
// without key of that title first (a title is the only name such a task
// has, and what Export writes for it), else the one task of that title. It
// returns what is wrong instead when no task, or more than one, answers.
func (r *taskRefs) resolve(ref string) (*refTask, string) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, "is required: the key (or title) of the task the step runs"
	}
	found := r.byKey[ref]
	by := "key"
	if len(found) == 0 {
		by = "title"
		all := r.byTitle[ref]
		found = slices.DeleteFunc(slices.Clone(all), func(t *refTask) bool { return t.key != "" })
		if len(found) == 0 {
			found = all
		}
	}
	switch {
	case len(found) == 0:
		return nil, fmt.Sprintf("no task of the document or of the project has the key or title %q (a step names its task by key, or by title; not by id)", clipText(ref, 64))
	case len(found) > 1:
		return nil, fmt.Sprintf("%d tasks have the %s %q: give them keys and name the task by its key", len(found), by, clipText(ref, 64))
	case found[0].pruned:
		return nil, fmt.Sprintf("task %q is not in the document and prune deletes it: keep it in the document", clipText(ref, 64))
	}
	return found[0], ""
}

// wfApply is what making a workflow's change needs.
type wfApply struct {
	// in is the desired workflow; its steps name tasks by id, placeholders
	// for the tasks the apply creates.
	in WorkflowInput
	// version is the stored version an update starts from: a save by
	// someone else between the plan and the change is refused, not undone.
	version int
}

// planWorkflows matches the document's workflows with the project's, checks
// each as Workflows.Create and Update would once the document's tasks exist
// (problems into fe, named by workflow and step), and returns their changes
// (creations, updates, unchanged, in the document's order) and, with prune
// and a workflows section, the deletions of the project's workflows the
// document lacks. pruned holds the tasks the apply deletes: a workflow that
// stays may not lose one.
func (m *Master) planWorkflows(ctx context.Context, doc *Document, proj *Project, prune bool, refs *taskRefs,
	pruned map[string]*Task, fe protocol.FieldErrors) (changes, deletions []*applyStep, err error) {
	if len(doc.Workflows) > MaxDocumentWorkflows {
		return nil, nil, Errorf(KindTooLarge, "the document holds %d workflows: at most %d in one apply", len(doc.Workflows), MaxDocumentWorkflows)
	}
	all, err := m.workflows.projectWorkflows(ctx, proj.ID)
	if err != nil {
		return nil, nil, err
	}
	// Copies of the definitions: their steps get task ids below, and the
	// document stays as written (a dry run's document may be applied next).
	list := make([]WorkflowDef, len(doc.Workflows))
	keys, titles := map[string]int{}, map[string]int{}
	for i := range list {
		list[i] = doc.Workflows[i].WorkflowDef
		list[i].Steps = slices.Clone(list[i].Steps)
		d := &list[i]
		d.normalize()
		name := docWorkflowName(i, d)
		switch {
		case d.Key != "":
			if j, dup := keys[d.Key]; dup {
				fe[name+".key"] = fmt.Sprintf("workflows[%d] has this key too", j)
			}
			keys[d.Key] = i
		case d.Title == "":
			fe[name+".title"] = "is required"
		default:
			if j, dup := titles[d.Title]; dup {
				fe[name+".title"] = fmt.Sprintf("workflows[%d] has this title too: give them keys to tell them apart", j)
			}
			titles[d.Title] = i
		}
	}
	// Match them with the project's, as tasks are: by key, else the one
	// workflow without key of the same title.
	byKey, byTitle := map[string][]*Workflow{}, map[string][]*Workflow{}
	for _, w := range all {
		if w.Key != "" {
			byKey[w.Key] = append(byKey[w.Key], w)
		} else {
			byTitle[w.Title] = append(byTitle[w.Title], w)
		}
	}
	cur := make([]*Workflow, len(list))
	claimed := map[string]int{}
	for i := range list {
		d := &list[i]
		name := docWorkflowName(i, d)
		found, field := byKey[d.Key], "key"
		if d.Key == "" || len(found) == 0 {
			found, field = byTitle[d.Title], "title"
		}
		switch {
		case len(found) > 1:
			ids := make([]string, len(found))
			for k, w := range found {
				ids[k] = w.ID
			}
			fe[name+"."+field] = fmt.Sprintf("%d workflows of the project have this %s (%s): give them keys, or delete all but one",
				len(found), field, strings.Join(ids, ", "))
			continue
		case len(found) == 0:
			continue
		}
		if j, dup := claimed[found[0].ID]; dup {
			fe[name] = fmt.Sprintf("matches the same workflow of the project as workflows[%d] (%s)", j, found[0].ID)
			continue
		}
		claimed[found[0].ID] = i
		cur[i] = found[0]
	}

	now := time.Now().UTC()
	for i := range list {
		d := &list[i]
		name := docWorkflowName(i, d)
		// Steps name tasks by key or title; the checks and the save, by id.
		bad := map[int]string{}
		for j := range d.Steps {
			s := &d.Steps[j]
			t, why := refs.resolve(s.Task)
			if why != "" {
				bad[j] = why
				continue
			}
			s.Task = t.id
		}
		id := "new" // a new workflow's id is chosen when it is saved
		if cur[i] != nil {
			id = cur[i].ID
		}
		vfe := d.validate(id, now, func(taskID string) string {
			if t := refs.byID[taskID]; t != nil && t.broadcast {
				return "a task with broadcast routing cannot be a step yet: its runs on every executor are not one step's run"
			}
			return ""
		})
		for k, v := range vfe {
			fe[name+"."+k] = v
		}
		for j, why := range bad {
			at := fmt.Sprintf("%s.steps[%d].task", name, j)
			if n := d.Steps[j].Name; n != "" {
				why = fmt.Sprintf("step %q: %s", clipText(n, 64), why)
			}
			fe[at] = why
		}
		s := &applyStep{change: &PlanChange{Kind: PlanWorkflow, Key: d.Key, Title: d.Title},
			wf: &wfApply{in: WorkflowInput{WorkflowDef: *d, Project: proj.Name}}}
		if w := cur[i]; w == nil {
			s.change.Action = PlanCreate
		} else {
			s.change.ID, s.wf.version = w.ID, w.Version
			s.change.Fields = diffWorkflow(d, &w.WorkflowDef)
			s.change.Action = PlanUpdate
			if len(s.change.Fields) == 0 {
				s.change.Action, s.change.Done = PlanUnchanged, true
			}
		}
		changes = append(changes, s)
	}

	// The project's workflows the document lacks: deleted with prune when
	// the document has a workflows section, else left alone, and then none
	// may lose a step's task to the prune of tasks.
	var kept []string
	for _, w := range all {
		if _, ok := claimed[w.ID]; ok {
			continue
		}
		if prune && doc.Workflows != nil {
			deletions = append(deletions, &applyStep{change: &PlanChange{Kind: PlanWorkflow, Action: PlanDelete, Key: w.Key, Title: w.Title, ID: w.ID},
				wf: &wfApply{}})
			continue
		}
		for _, st := range w.Steps {
			if t := pruned[st.Task]; t != nil {
				kept = append(kept, fmt.Sprintf("workflow “%s” (not in the document, so it stays) has step %s on task “%s”",
					clipText(w.Title, 60), st.Name, clipText(t.Title, 60)))
			}
		}
	}
	if len(kept) > 0 {
		fe["prune"] = strings.Join(kept, "; ") + ": prune would delete the task; keep it in the document, or list the workflows too"
	}
	return changes, deletions, nil
}

// diffWorkflow names the fields in which the desired workflow differs from
// the stored one (both normalized).
func diffWorkflow(want, have *WorkflowDef) []string {
	a, _ := json.Marshal(canonWorkflow(*want))
	b, _ := json.Marshal(canonWorkflow(*have))
	var am, bm map[string]json.RawMessage
	_ = json.Unmarshal(a, &am)
	_ = json.Unmarshal(b, &bm)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(am)) {
		if !bytes.Equal(am[k], bm[k]) {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(bm)) {
		if _, ok := am[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// canonWorkflow is a definition as compared: an empty list or map the same
// as none, times in UTC (a document may write another offset).
func canonWorkflow(d WorkflowDef) WorkflowDef {
	if len(d.Params) == 0 {
		d.Params = nil
	}
	for _, t := range []**time.Time{&d.StartAt, &d.EndAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	d.Steps = slices.Clone(d.Steps)
	for i := range d.Steps {
		s := &d.Steps[i]
		if len(s.Params) == 0 {
			s.Params = nil
		}
		if len(s.After) == 0 {
			s.After = nil
		}
	}
	return d
}

// applyWorkflow makes one workflow's change through the workflow domain,
// which authorizes and checks it again; created maps the placeholders of
// the tasks the apply created to their ids.
func (m *Master) applyWorkflow(ctx context.Context, s *applyStep, created map[string]string) error {
	c := s.change
	switch c.Action {
	case PlanUnchanged:
		return nil
	case PlanDelete:
		return m.workflows.Delete(ctx, c.ID)
	}
	in := s.wf.in
	in.Steps = slices.Clone(in.Steps)
	for i := range in.Steps {
		if id, ok := created[in.Steps[i].Task]; ok {
			in.Steps[i].Task = id
		}
	}
	if c.Action == PlanCreate {
		w, err := m.workflows.Create(ctx, in)
		if err != nil {
			return err
		}
		c.ID = w.ID
		return nil
	}
	in.Version = s.wf.version
	_, err := m.workflows.Update(ctx, c.ID, in)
	return err
}
