package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showCloneTask shows the new-task form filled with a task's definition,
// titled "… (copy)", whatever the task's status. Secrets are masked as on
// the edit form; saving them masked copies the original's values
// (createTask with clone_of).
func (s *server) showCloneTask(c *gin.Context) {
	t, err := s.m.Tasks().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm := taskFormFromTask(t)
	vm.Layout = s.layout(c, tr(c, "TaskNew"), "tasks")
	vm.ID, vm.Title, vm.CloneOf, vm.CloneOfTitle = "", master.CloneTitle(t.Title), t.ID, t.Title
	if err := s.taskFormOptions(c.Request.Context(), &vm, t.Executors, t.Children, []int64{t.ProjectID}); err != nil {
		s.serverError(c, err)
		return
	}
	if vm.Connections, err = s.connOptions(c.Request.Context(), t.Type, t.Project); err != nil {
		s.serverError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.TaskFormPage(vm))
}

// apiCloneTask answers POST /api/v1/tasks/{id}/clone with the new, stopped
// copy (201), its secrets copied from the original.
func (s *server) apiCloneTask(c *gin.Context) {
	t, err := s.m.Tasks().Clone(c.Request.Context(), c.Param("id"), currentUser(c).Name)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, master.MaskTask(*t))
}

// cloneFormOf keeps, on a posted new-task form, the task it copies (the
// hidden clone_of field) and that task's title for the heading.
func (s *server) cloneFormOf(c *gin.Context, vm *views.TaskFormVM) {
	vm.CloneOf = c.PostForm("clone_of")
	if vm.CloneOf == "" {
		return
	}
	vm.CloneOfTitle = vm.CloneOf
	if t, err := s.m.Tasks().Get(c.Request.Context(), vm.CloneOf); err == nil {
		vm.CloneOfTitle = t.Title
	}
}
