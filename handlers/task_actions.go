package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// startTask starts a stopped task on every running executor.
func (s *server) startTask(c *gin.Context) {
	s.taskTransition(c, "TaskStart", "TaskDoneStarted", s.m.Tasks().Start)
}

// stopTask stops a running or paused task everywhere.
func (s *server) stopTask(c *gin.Context) {
	s.taskTransition(c, "TaskStop", "TaskDoneStopped", s.m.Tasks().Stop)
}

// pauseTask keeps a running task's schedule and skips its runs.
func (s *server) pauseTask(c *gin.Context) {
	s.taskTransition(c, "TaskPause", "TaskDonePaused", s.m.Tasks().Pause)
}

// resumeTask lets a paused task run again.
func (s *server) resumeTask(c *gin.Context) {
	s.taskTransition(c, "TaskResume", "TaskDoneResumed", s.m.Tasks().Resume)
}

// runTask runs a task once now on one executor.
func (s *server) runTask(c *gin.Context) {
	s.taskAction(c, "TaskRunOnce", func(ctx context.Context, t *master.Task) (string, error) {
		_, node, err := s.m.Tasks().Run(ctx, t.ID)
		if err != nil {
			return "", err
		}
		return tr(c, "FlashTaskRunSent", "Title", t.Title, "Node", node), nil
	})
}

// deleteTask stops a task everywhere and marks it deleted; its runs stay.
func (s *server) deleteTask(c *gin.Context) {
	s.taskAction(c, "Delete", func(ctx context.Context, t *master.Task) (string, error) {
		if err := s.m.Tasks().Delete(ctx, t.ID); err != nil {
			return "", err
		}
		return tr(c, "FlashTaskDone", "Title", t.Title, "Done", tr(c, "TaskDoneDeleted")), nil
	})
}

func (s *server) taskTransition(c *gin.Context, verb, done string, do func(context.Context, string) (*master.Task, error)) {
	s.taskAction(c, verb, func(ctx context.Context, t *master.Task) (string, error) {
		if _, err := do(ctx, t.ID); err != nil {
			return "", err
		}
		return tr(c, "FlashTaskDone", "Title", t.Title, "Done", tr(c, done)), nil
	})
}

// taskAction runs one action (verb: the message naming it) on the task in
// the path and reports its outcome
// where it was asked: the list (keeping its filters) or the task page (?from=detail).
func (s *server) taskAction(c *gin.Context, verb string, op func(context.Context, *master.Task) (string, error)) {
	id := c.Param("id")
	ctx := c.Request.Context()
	t, err := s.m.Tasks().Get(ctx, id)
	var msg string
	if err == nil {
		msg, err = op(ctx, t)
	}
	if err != nil {
		status := errorStatus(err)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		if status == http.StatusForbidden || status == http.StatusNotFound && t == nil {
			s.fail(c, err) // refused before anything was tried: the page says so with its status
			return
		}
		s.log.Warn("task action failed", "action", verb, "task", id, "user", currentUser(c).Name, "err", err)
		msg := tr(c, "TaskActionFailedID", "Verb", tr(c, verb), "ID", id, "Reason", refusal(c, err))
		if t != nil {
			msg = tr(c, "TaskActionFailed", "Verb", tr(c, verb), "Title", t.Title, "Reason", refusal(c, err))
		}
		s.renderTaskOutcome(c, id, status, false, msg)
		return
	}
	s.log.Info("task action", "action", verb, "task", id, "user", currentUser(c).Name)
	s.renderTaskOutcome(c, id, http.StatusOK, true, msg)
}

// renderTaskOutcome ends a task action: htmx gets the panel it swaps with the
// message, a plain form post is redirected with the message kept.
func (s *server) renderTaskOutcome(c *gin.Context, id string, status int, ok bool, msg string) {
	fromDetail := c.Query("from") == "detail"
	back := "/tasks/" + url.PathEscape(id)
	if !fromDetail {
		f, err := taskFilter(c)
		q := url.Values{}
		if err == nil {
			q = taskListQuery(views.TaskFilterVM{Title: f.Title, Node: f.Node, Status: c.Query("status")}, f.Offset)
		}
		back = withQuery("/tasks", q)
	}
	if !isHX(c) {
		s.setFlash(c, ok, msg)
		if fromDetail && s.taskGone(c, id) {
			back = "/tasks"
		}
		c.Redirect(http.StatusSeeOther, back)
		return
	}
	if fromDetail {
		vm, err := s.taskVM(c, id, &views.Flash{OK: ok, Message: msg})
		if errors.Is(err, master.ErrNotFound) {
			// Deleted (or gone meanwhile): show the list with the message.
			s.setFlash(c, ok, msg)
			c.Header("HX-Redirect", "/tasks")
			c.Status(http.StatusOK)
			return
		}
		if err != nil {
			s.serverError(c, err)
			return
		}
		s.render(c, status, views.TaskPanel(vm))
		return
	}
	vm, err := s.tasksVM(c, &views.Flash{OK: ok, Message: msg})
	if err != nil {
		// The kept filters are bad: show the message over the unfiltered list.
		c.Request.URL.RawQuery = ""
		if vm, err = s.tasksVM(c, &views.Flash{OK: ok, Message: msg}); err != nil {
			s.serverError(c, err)
			return
		}
	}
	s.render(c, status, views.TasksPanel(vm))
}

// taskGone reports whether the task no longer exists (e.g. just deleted).
func (s *server) taskGone(c *gin.Context, id string) bool {
	_, err := s.m.Tasks().Get(c.Request.Context(), id)
	return errors.Is(err, master.ErrNotFound)
}
