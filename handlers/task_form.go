package handlers

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// readTaskForm reads the task form (form.Task) into the view model, exactly
// as typed, the engine's input and the errors of fields that do not parse.
func (s *server) readTaskForm(c *gin.Context, edit bool) (views.TaskFormVM, master.TaskInput, protocol.FieldErrors) {
	title := tr(c, "TaskNew")
	if edit {
		title = tr(c, "TaskEdit")
	}
	fields, in, fe := form.Task(postForm(c))
	// A new task of the console goes to the current project; an edit
	// keeps the task's.
	if p := s.currentProject(c); p != nil && !edit {
		in.Project = p.Name
	}
	vm := views.TaskFormVM{Layout: s.layout(c, title, "tasks"), Edit: edit, ID: c.Param("id"), TaskFields: fields}
	return vm, in, fe
}

// taskFormError puts an engine error into the form and returns the status to
// answer with; 0 means it already answered 500.
func (s *server) taskFormError(c *gin.Context, err error, vm *views.TaskFormVM) int {
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

// renderTaskForm fills the executor and child choices and shows the form.
func (s *server) renderTaskForm(c *gin.Context, status int, vm views.TaskFormVM) {
	if vm.Locked == "" {
		executors := c.PostFormArray("executors")
		children := c.PostFormArray("children")
		if err := s.taskFormOptions(c.Request.Context(), &vm, executors, children, s.currentProjectIDs(c)); err != nil {
			s.serverError(c, err)
			return
		}
	}
	project := ""
	if vm.Edit {
		if t, err := s.m.Tasks().Get(c.Request.Context(), vm.ID); err == nil {
			project = t.Project
		}
	} else if p := s.currentProject(c); p != nil {
		project = p.Name
	}
	var err error
	if vm.Connections, err = s.connOptions(c.Request.Context(), vm.Type, project); err != nil {
		s.serverError(c, err)
		return
	}
	vm.OtherErrors = otherErrors(vm.Errors)
	vm.Zones = s.zones
	s.render(c, status, views.TaskFormPage(vm))
}

// taskFormOptions lists the workers and the other tasks as checkboxes, the
// given ones checked; a checked name that no longer exists is still shown.
func (s *server) taskFormOptions(ctx context.Context, vm *views.TaskFormVM, executors, children []string, projects []int64) error {
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		return err
	}
	checked := map[string]bool{}
	for _, e := range executors {
		checked[e] = true
	}
	vm.Executors = vm.Executors[:0]
	for _, n := range nodes {
		if n.Type != master.TypeWorker {
			continue
		}
		vm.Executors = append(vm.Executors, views.NodeOption{Name: n.Name, StatusName: n.Status.String(), Checked: checked[n.Name]})
		delete(checked, n.Name)
	}
	for _, e := range executors {
		if checked[e] {
			vm.Executors = append(vm.Executors, views.NodeOption{Name: e, StatusName: "unknown", Checked: true})
			delete(checked, e)
		}
	}
	tasks, _, err := s.m.Tasks().List(ctx, master.TaskFilter{Limit: 500, Projects: projects})
	if err != nil {
		return err
	}
	checked = map[string]bool{}
	for _, ch := range children {
		checked[ch] = true
	}
	vm.Children = vm.Children[:0]
	for _, t := range tasks {
		if t.ID == vm.ID {
			continue
		}
		vm.Children = append(vm.Children, views.TaskOption{ID: t.ID, Title: t.Title, Checked: checked[t.ID]})
		delete(checked, t.ID)
	}
	for _, ch := range children {
		if checked[ch] {
			vm.Children = append(vm.Children, views.TaskOption{ID: ch, Title: ch, Checked: true})
			delete(checked, ch)
		}
	}
	return nil
}

// otherErrors are the messages of fields the form has no place for.
func otherErrors(fe map[string]string) []string {
	var out []string
	for k, v := range fe {
		if !views.TaskFormSpec.Knows(k) {
			out = append(out, k+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

// taskFormFromTask fills the form with a stored task, its secrets masked:
// saving the mask unchanged keeps the stored value.
func taskFormFromTask(stored *master.Task) views.TaskFormVM {
	return views.TaskFormVM{ID: stored.ID, TaskFields: form.TaskFieldsOf(stored)}
}
