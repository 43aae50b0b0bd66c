package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showEditTask shows the form filled with a task's definition; for a task
// that cannot be edited it says why.
func (s *server) showEditTask(c *gin.Context) {
	t, err := s.m.Tasks().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm := taskFormFromTask(t)
	vm.Layout, vm.Edit = s.layout(c, tr(c, "TaskEdit"), "tasks"), true
	if !editable(t) {
		vm.Locked = lockedMessage(lc(c), t)
		s.render(c, http.StatusOK, views.TaskFormPage(vm))
		return
	}
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

// updateTask saves an edit (of a running or paused task too: every executor
// switches, or none), or shows the form again with inline errors; a task
// that cannot be edited is refused with the reason.
func (s *server) updateTask(c *gin.Context) {
	id := c.Param("id")
	t, err := s.m.Tasks().Get(c.Request.Context(), id)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm, in, fe := s.readTaskForm(c, true)
	if !editable(t) {
		vm.Locked = lockedMessage(lc(c), t)
		s.renderTaskForm(c, http.StatusConflict, vm)
		return
	}
	status := http.StatusUnprocessableEntity
	if len(fe) == 0 {
		saved, err := s.m.Tasks().Update(c.Request.Context(), id, in)
		if err == nil {
			s.log.Info("task edited", "task", id, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashTaskSaved", "Title", saved.Title))
			c.Redirect(http.StatusSeeOther, "/tasks/"+url.PathEscape(id))
			return
		}
		if errors.Is(err, master.ErrVersionMoved) {
			// Another save came first: the form keeps what was typed, links
			// what changed, and a second save saves over it.
			if cur, gerr := s.m.Tasks().Get(c.Request.Context(), id); gerr == nil {
				vm.Conflict = refusal(c, err)
				vm.ConflictDiff = fmt.Sprintf("/tasks/%s/versions/%d?with=%s", url.PathEscape(id), cur.Version, url.QueryEscape(vm.Version))
				vm.Version = strconv.Itoa(cur.Version)
				s.renderTaskForm(c, http.StatusConflict, vm)
				return
			}
		}
		if errors.Is(err, master.ErrState) {
			vm.Locked = refusal(c, err)
			s.renderTaskForm(c, http.StatusConflict, vm)
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

func lockedMessage(lc *locale.Localizer, t *master.Task) string {
	return lc.T("TaskLocked", "Title", t.Title, "Status", lc.T(taskStatusIDs[t.Status.String()]))
}
