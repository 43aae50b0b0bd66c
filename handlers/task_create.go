package handlers

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showNewTask shows the empty task form with its defaults.
func (s *server) showNewTask(c *gin.Context) {
	vm := views.TaskFormVM{Layout: s.layout(c, tr(c, "TaskNew"), "tasks"), TaskFields: views.TaskFields{
		Type: "http", ScheduleKind: "cron", Timeout: "30s", Retries: "0", HTTPMethod: "GET",
	}}
	s.renderTaskForm(c, http.StatusOK, vm)
}

// createTask stores a new, stopped task and shows it, or shows the form again
// with inline errors and what was typed.
func (s *server) createTask(c *gin.Context) {
	vm, in, fe := s.readTaskForm(c, false)
	s.cloneFormOf(c, &vm)
	status := http.StatusUnprocessableEntity
	if len(fe) == 0 {
		create := s.m.Tasks().Create
		if vm.CloneOf != "" { // a clone: masked secrets stand for the original's
			create = func(ctx context.Context, in master.TaskInput, by string) (*master.Task, error) {
				return s.m.Tasks().CreateCopy(ctx, vm.CloneOf, in, by)
			}
		}
		t, err := create(c.Request.Context(), in, currentUser(c).Name)
		if err == nil {
			s.log.Info("task added", "task", t.ID, "title", t.Title, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashTaskCreated", "Title", t.Title))
			c.Redirect(http.StatusSeeOther, "/tasks/"+url.PathEscape(t.ID))
			return
		}
		if status = s.taskFormError(c, err, &vm); status == 0 {
			return
		}
	} else {
		vm.Errors = fe
	}
	s.renderTaskForm(c, status, vm)
}
