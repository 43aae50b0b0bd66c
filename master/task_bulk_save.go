// Bulk creation and edit: many task definitions in one call, each checked
// as Tasks.Create and Tasks.Update check one, written a chunk at a time in one
// transaction, each reported on its own.

package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// saveChunk is how many tasks of a bulk save are written in one transaction.
const saveChunk = 1000

// What a bulk save did to a task.
const (
	SaveCreate = "create"
	SaveUpdate = "update"
)

// SaveResult is the outcome of a bulk save for one task of the request,
// by its place in it (Index): OK with the task's ID, or Error (and Fields,
// the field errors, for a definition that is not valid). With start asked,
// Started says the task was started, StartError why not.
type SaveResult struct {
	Index      int                  `json:"index"`
	Action     string               `json:"action"`
	ID         string               `json:"id,omitempty"`
	Title      string               `json:"title,omitempty"`
	OK         bool                 `json:"ok"`
	Error      string               `json:"error,omitempty"`
	Fields     protocol.FieldErrors `json:"fields,omitempty"`
	Started    bool                 `json:"started,omitempty"`
	StartError string               `json:"start_error,omitempty"`
}

// saveItem is one task of a bulk save on its way.
type saveItem struct {
	r   *SaveResult
	in  TaskInput
	cur *store.Task // the stored task, for an update
	row *store.Task
}

// Save creates (an input without id) or updates (an input with the id
// of a stopped task) each of inputs, each on its own: an input that is not
// valid, names an unknown executor, or a project (or task) whoever asks may
// not edit is reported and never stops the others. Every input is checked
// as Tasks.Create or Tasks.Update would check it, against the nodes, users and
// keys read once (keys and children of the request's earlier inputs
// count); the valid ones are written saveChunk at a time, one transaction
// each (a chunk that fails as a whole is written task by task). With start,
// the tasks saved are then started as Tasks.Bulk starts them. The results are
// in the order of inputs.
func (tk *Tasks) Save(ctx context.Context, inputs []TaskInput, start bool, by string) ([]SaveResult, error) {
	if len(inputs) == 0 {
		return nil, Errorf(KindInvalid, "no task given: send at least one")
	}
	if len(inputs) > MaxBulkTasks {
		return nil, Errorf(KindInvalid, "%d tasks given: at most %d at once", len(inputs), MaxBulkTasks)
	}
	if p := PrincipalFrom(ctx); p != nil && !p.CanAnywhere(ActEdit) {
		return nil, Errorf(KindForbidden, "forbidden: your role may not %s in any project", actionVerb[ActEdit])
	}
	ctx = withVia(ctx, ViaBulk)
	create := make([]bool, len(inputs))
	for i := range inputs {
		create[i] = strings.TrimSpace(inputs[i].ID) == ""
	}
	out, err := tk.saveTasks(ctx, inputs, create, by)
	if err != nil {
		return nil, err
	}
	if start {
		tk.startSaved(ctx, out)
	}
	return out, nil
}

// saveTasks is Tasks.Save without its bounds: create[i] says inputs[i] is
// created, with its id when it has one (Apply chooses the ids of the tasks
// it creates, so that their parents can name them), else updated.
func (tk *Tasks) saveTasks(ctx context.Context, inputs []TaskInput, create []bool, by string) ([]SaveResult, error) {
	out := make([]SaveResult, len(inputs))
	items := make([]*saveItem, len(inputs))
	var updates []string
	seen := map[string]int{}
	for i := range inputs {
		in := inputs[i]
		in.ID = strings.TrimSpace(in.ID)
		out[i] = SaveResult{Index: i, Action: SaveCreate, ID: in.ID, Title: in.Title}
		if !create[i] {
			out[i].Action = SaveUpdate
			if j, dup := seen[in.ID]; dup {
				out[i].Error = fmt.Sprintf("task %s is given twice (also at index %d)", printable(in.ID), j)
				continue
			}
			seen[in.ID] = i
			updates = append(updates, in.ID)
		}
		items[i] = &saveItem{r: &out[i], in: in}
	}
	stored, err := store.GetTasks(ctx, tk.m.st.DB, updates)
	if err != nil {
		return nil, err
	}
	sc := &saveChecks{checks: map[int64]*taskCheck{}, projects: map[string]*Project{}}
	for _, in := range inputs {
		sc.keys = sc.keys || strings.TrimSpace(in.Key) != ""
		sc.children = sc.children || len(in.Children) > 0
	}
	for _, it := range items {
		if it != nil {
			if err := tk.checkSave(ctx, it, stored, sc); err != nil {
				return nil, err
			}
		}
	}
	var valid []*saveItem
	for _, it := range items {
		if it != nil && it.row != nil {
			valid = append(valid, it)
		}
	}
	for chunk := range slices.Chunk(valid, saveChunk) {
		tk.writeSaves(ctx, chunk, by)
	}
	return out, nil
}

// checkSave checks one input of a bulk save and builds its row; a refusal
// goes into its result. Only a database failure is returned.
func (tk *Tasks) checkSave(ctx context.Context, it *saveItem, stored map[string]*store.Task, sc *saveChecks) error {
	projects := sc.projects
	in, r := &it.in, it.r
	refuse := func(err error) error {
		if KindOf(err) == 0 {
			return err
		}
		var fe protocol.FieldErrors
		if errors.As(err, &fe) {
			r.Fields = fe
		}
		r.Error = Message(err)
		return nil
	}
	project := func(name string) (*Project, error) {
		if p, ok := projects[name]; ok {
			return p, nil
		}
		p, err := tk.m.projects.project(ctx, name)
		if err != nil && KindOf(err) == 0 {
			return nil, err
		}
		if err == nil {
			projects[name] = p
		}
		return p, err
	}
	name := strings.TrimSpace(in.Project)
	if r.Action == SaveCreate {
		if in.ID == "" {
			in.ID = uuid.NewString()
		}
		p, err := project(name)
		if err != nil {
			return refuse(err)
		}
		if err := authorize(ctx, p.ID, ActEdit, projectNotFound(p.Name)); err != nil {
			return refuse(err)
		}
		in.projectID = p.ID
	} else {
		cur := stored[in.ID]
		if cur == nil {
			return refuse(taskNotFound(printable(in.ID)))
		}
		if err := authorize(ctx, cur.ProjectID, ActEdit, taskNotFound(in.ID)); err != nil {
			return refuse(err)
		}
		in.projectID = cur.ProjectID
		if name != "" {
			p, err := project(name)
			if err != nil {
				return refuse(err)
			}
			if err := authorize(ctx, p.ID, ActEdit, projectNotFound(name)); err != nil {
				return refuse(err)
			}
			in.projectID = p.ID
		}
		if err := prepareEdit(cur, in, false); err != nil {
			return refuse(err)
		}
		if err := tk.conflictIfMoved(ctx, cur, in.Version); err != nil {
			return refuse(err)
		}
		it.cur = cur
	}
	chk, err := tk.saveCheck(ctx, sc, in.projectID)
	if err != nil {
		return err
	}
	tk.normalizeTaskInput(in)
	row, err := tk.checkTaskInputWith(ctx, in, chk)
	if err != nil {
		return refuse(err)
	}
	row.ProjectID = in.projectID
	// The next inputs are checked against this one: its key is taken, its
	// children are in the graph.
	if in.Key != "" {
		chk.keys[in.Key] = in.ID
	}
	if chk.graph != nil {
		chk.graph[in.ID] = in.Children
	}
	it.row, r.ID = row, row.ID
	return nil
}

// saveChecks is what the checks of a bulk save read once: a check per
// project, the projects by name, and whether any input has a key.
type saveChecks struct {
	checks   map[int64]*taskCheck
	projects map[string]*Project
	// keys and children say an input has a key, children: the keys, the
	// children graph are read (once per project).
	keys, children bool
}

// saveCheck returns the check of a project's inputs, made when first
// needed: its nodes, pools and, when an input of the save has a key, every
// key its tasks hold, read once.
func (tk *Tasks) saveCheck(ctx context.Context, sc *saveChecks, project int64) (*taskCheck, error) {
	checks := sc.checks
	if chk := checks[project]; chk != nil {
		return chk, nil
	}
	chk, err := tk.newTaskCheck(ctx)
	if err != nil {
		return nil, err
	}
	if err := tk.checkInProject(ctx, chk, project); err != nil {
		return nil, err
	}
	if sc.children {
		// Read before any input is checked: each checked input joins it.
		if err := tk.loadGraph(ctx, chk); err != nil {
			return nil, err
		}
	}
	chk.keys = map[string]string{}
	if !sc.keys {
		checks[project] = chk // no input has a key: none to compare
		return chk, nil
	}
	specs, err := store.TaskSpecsWithAnyKey(ctx, tk.m.st.DB, chk.project)
	if err != nil {
		return nil, err
	}
	for id, spec := range specs {
		var d protocol.TaskDef
		if json.Unmarshal([]byte(spec), &d) == nil && d.Key != "" {
			chk.keys[d.Key] = id
		}
	}
	checks[project] = chk
	return chk, nil
}

// writeSaves writes a chunk of checked saves in one transaction, or, when
// that fails, each in its own, and records their events.
func (tk *Tasks) writeSaves(ctx context.Context, chunk []*saveItem, by string) {
	var creates []*store.Task
	for _, it := range chunk {
		if it.cur == nil {
			it.row.CreatedBy, it.row.Status = by, store.TaskStopped
			creates = append(creates, it.row)
		}
	}
	err := store.RetryTx(ctx, tk.m.st.DB, func(ctx context.Context, tx bun.Tx) error {
		if err := store.CreateTasks(ctx, tx, creates); err != nil {
			return err
		}
		vs := make([]store.TaskVersion, 0, len(creates))
		for _, it := range chunk {
			if it.cur == nil {
				v, err := newVersion(ctx, it.row, it.in.Note)
				if err != nil {
					return err
				}
				vs = append(vs, v)
			}
		}
		if err := store.AddTaskVersions(ctx, tx, vs); err != nil {
			return err
		}
		for _, it := range chunk {
			if err := tk.writeSave(ctx, tx, it, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tk.m.log.Warn("bulk save: the chunk failed as a whole; saving its tasks one by one", "tasks", len(chunk), "err", err)
		for _, it := range chunk {
			err := store.RetryTx(ctx, tk.m.st.DB, func(ctx context.Context, tx bun.Tx) error { return tk.writeSave(ctx, tx, it, true) })
			if err != nil {
				if it.cur != nil {
					err = mapTaskErr(err, it.row.ID)
				}
				if KindOf(err) == 0 {
					tk.m.log.Error("bulk save", "task", it.row.ID, "err", err)
					it.r.Error = "internal error; see the master's log"
				} else {
					it.r.Error = Message(err)
				}
				if it.cur == nil {
					it.r.ID = ""
				}
				continue
			}
			it.r.OK = true
		}
	} else {
		for _, it := range chunk {
			it.r.OK = true
		}
	}
	evs := make([]store.Event, 0, len(chunk))
	for _, it := range chunk {
		e := store.Event{At: time.Now(), Actor: ActorFrom(ctx), Action: "task.create", TargetType: store.TargetTask,
			Target: it.row.ID, Outcome: store.OutcomeOK, Detail: "“" + it.row.Title + "” (bulk)", ProjectID: it.row.ProjectID}
		if it.cur != nil {
			e.Action = "task.edit"
		}
		if !it.r.OK {
			e.Outcome, e.Detail = store.OutcomeError, e.Detail+": "+it.r.Error
			if it.cur == nil {
				e.Target = ""
			}
		}
		evs = append(evs, e)
	}
	tk.m.events.recordAll(ctx, "task.create/edit (bulk)", evs)
}

// writeSave writes one save in tx: an update (with its members and the run
// grants of former executors), or, with create, a creation; a creation
// without it was inserted with its chunk, and only its members are written.
func (tk *Tasks) writeSave(ctx context.Context, tx bun.Tx, it *saveItem, create bool) error {
	row := it.row
	if it.cur == nil {
		if create {
			if err := store.CreateTask(ctx, tx, row); err != nil {
				return err
			}
			if err := tk.writeVersion(ctx, tx, nil, row, it.in.Note); err != nil {
				return err
			}
		}
		if row.Selector == "" {
			return nil // a new task has no selected members
		}
		_, err := syncTaskMembers(ctx, tx, row.ID, row.Selector)
		return err
	}
	row.Version = it.cur.Version + 1
	if err := store.UpdateTask(ctx, tx, row, it.cur.Version); err != nil {
		return err
	}
	if err := tk.writeVersion(ctx, tx, it.cur, row, it.in.Note); err != nil {
		return err
	}
	if _, err := syncTaskMembers(ctx, tx, row.ID, row.Selector); err != nil {
		return err
	}
	for _, e := range it.cur.Executors {
		if !slices.Contains(row.Executors, e) {
			if err := store.AddRunGrant(ctx, tx, row.ID, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// startSaved starts the tasks a bulk save saved, as Tasks.Bulk does, and
// says in each result how it went.
func (tk *Tasks) startSaved(ctx context.Context, out []SaveResult) {
	var ids []string
	at := map[string]*SaveResult{}
	for i := range out {
		if out[i].OK {
			ids = append(ids, out[i].ID)
			at[out[i].ID] = &out[i]
		}
	}
	if len(ids) == 0 {
		return
	}
	results, err := tk.Bulk(ctx, string(TaskStart), ids)
	if err != nil {
		for _, id := range ids {
			at[id].StartError = Message(err)
		}
		return
	}
	for _, r := range results {
		if s := at[r.ID]; s != nil {
			s.Started, s.StartError = r.OK, r.Error
		}
	}
}
