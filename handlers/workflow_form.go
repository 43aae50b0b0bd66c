package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// maxStepTasks bounds the tasks a step's choice lists.
const maxStepTasks = 1000

// workflowFormVM is the workflow form's page around its fields: the new
// one, or the edit of stored.
func (s *server) workflowFormVM(c *gin.Context, stored *master.Workflow) views.WorkflowFormVM {
	if stored == nil {
		return views.WorkflowFormVM{Layout: s.layout(c, tr(c, "WorkflowNew"), "workflows")}
	}
	return views.WorkflowFormVM{Layout: s.layout(c, tr(c, "WorkflowEditHeading", "Title", stored.Title), "workflows"),
		Edit: true, ID: stored.ID, SavedTitle: stored.Title}
}

// readWorkflowForm reads the workflow form (form.Workflow) into the view
// model, exactly as typed, the engine's input and the errors of fields that
// do not parse; an edit keeps the stored workflow's project.
func (s *server) readWorkflowForm(c *gin.Context, stored *master.Workflow) (views.WorkflowFormVM, master.WorkflowInput, protocol.FieldErrors) {
	vm := s.workflowFormVM(c, stored)
	fields, in, fe := form.Workflow(postForm(c))
	vm.WorkflowFields = fields
	if stored != nil {
		vm.Project, in.Project = stored.Project, ""
	}
	return vm, in, fe
}

// changeWorkflowForm answers a post of the form by one of its row buttons
// (op: Add step, Remove, Show its tasks): the form again, changed as typed,
// nothing saved. It reports false for a post that is a save.
func (s *server) changeWorkflowForm(c *gin.Context, stored *master.Workflow) bool {
	v := postForm(c)
	op := v.Get("op")
	if op == "" {
		return false
	}
	vm := s.workflowFormVM(c, stored)
	vm.WorkflowFields = form.WorkflowAsTyped(v)
	if stored != nil {
		vm.Project = stored.Project
	}
	vm.Focus, _ = form.ApplyWorkflowOp(&vm.WorkflowFields, op) // an unknown op changes nothing
	s.renderWorkflowForm(c, http.StatusOK, vm, stored)
	return true
}

// workflowFormError puts an engine error into the form and returns the
// status to answer with; 0 means it already answered 500.
func (s *server) workflowFormError(c *gin.Context, err error, vm *views.WorkflowFormVM) int {
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		vm.Errors = fe
		return http.StatusUnprocessableEntity
	}
	st := errorStatus(err)
	if st == 0 {
		s.serverError(c, err)
		return 0
	}
	vm.FormError = refusal(c, err)
	return st
}

// renderWorkflowForm fills the project and task choices and shows the form.
func (s *server) renderWorkflowForm(c *gin.Context, status int, vm views.WorkflowFormVM, stored *master.Workflow) {
	if err := s.workflowFormOptions(c, &vm, stored); err != nil {
		s.serverError(c, err)
		return
	}
	if len(vm.Steps) == 0 {
		vm.Steps = []views.StepFields{{}}
	}
	for k, v := range vm.Errors {
		if !vm.Knows(k) {
			vm.OtherErrors = append(vm.OtherErrors, k+": "+v)
		}
	}
	sort.Strings(vm.OtherErrors)
	vm.Zones = s.zones
	s.render(c, status, views.WorkflowFormPage(vm))
}

// workflowFormOptions lists the projects a new workflow may go to (those
// one may edit in; the current one first chosen) and the tasks of the
// chosen project by title; a step's task that is not among them (deleted,
// or past the list's bound) is still offered.
func (s *server) workflowFormOptions(c *gin.Context, vm *views.WorkflowFormVM, stored *master.Workflow) error {
	ctx := c.Request.Context()
	var project int64
	if stored != nil {
		project = stored.ProjectID
	} else {
		ps, err := s.m.Projects().List(ctx)
		if err != nil {
			return err
		}
		who := currentUser(c)
		byName := map[string]int64{}
		for _, p := range ps {
			if who.Can(p.ID, master.ActEdit) {
				vm.Projects = append(vm.Projects, p.Name)
				byName[p.Name] = p.ID
			}
		}
		if _, ok := byName[vm.Project]; !ok {
			vm.Project = ""
			if cur := s.currentProject(c); cur != nil && who.Can(cur.ID, master.ActEdit) {
				vm.Project = cur.Name
			} else if len(vm.Projects) > 0 {
				vm.Project = vm.Projects[0]
			}
		}
		project = byName[vm.Project]
	}
	if project == 0 {
		return nil
	}
	tasks, _, err := s.m.Tasks().List(ctx, store.TaskFilter{Limit: maxStepTasks, Projects: []int64{project}})
	if err != nil {
		return err
	}
	vm.Tasks = stepTaskOptions(tasks)
	var missing []string
	for _, st := range vm.Steps {
		if st.Task != "" && !slices.ContainsFunc(vm.Tasks, func(t views.TaskOption) bool { return t.ID == st.Task }) &&
			!slices.Contains(missing, st.Task) {
			missing = append(missing, st.Task)
		}
	}
	return s.addMissingTasks(ctx, vm, missing)
}

// stepTaskOptions are a project's tasks as a step's choices, by title; a
// title that several tasks share names each with its key or id too.
func stepTaskOptions(tasks []master.Task) []views.TaskOption {
	seen := map[string]int{}
	for _, t := range tasks {
		seen[t.Title]++
	}
	out := make([]views.TaskOption, 0, len(tasks))
	for _, t := range tasks {
		title := t.Title
		if seen[t.Title] > 1 {
			if t.Key != "" {
				title += " (" + t.Key + ")"
			} else {
				title += " (" + t.ID + ")"
			}
		}
		out = append(out, views.TaskOption{ID: t.ID, Title: title})
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.ToLower(out[i].Title) < strings.ToLower(out[j].Title) })
	return out
}

// addMissingTasks offers the steps' tasks that are not among the choices,
// by title where one may read it, else by id (the engine says what is
// wrong with it).
func (s *server) addMissingTasks(ctx context.Context, vm *views.WorkflowFormVM, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	titles, err := s.m.Reads().TaskTitles(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		title := titles[id]
		if title == "" {
			title = id
		}
		vm.Tasks = append(vm.Tasks, views.TaskOption{ID: id, Title: title})
	}
	return nil
}

// workflowFor reads the workflow :id for an action of a (the edit form):
// who may not read it gets the 404 of a missing one, who may read but not
// do a the 403; false means it answered.
func (s *server) workflowFor(c *gin.Context, a master.Action) (*master.Workflow, bool) {
	w, err := s.m.Workflows().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	if !currentUser(c).Can(w.ProjectID, a) {
		s.forbidden(c, "forbidden: your role in project "+w.Project+" may not do this")
		return nil, false
	}
	return w, true
}
