package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// showRun shows every field of one run and its captured output.
func (s *server) showRun(c *gin.Context) {
	ctx := c.Request.Context()
	r, err := s.m.GetRun(ctx, c.Param("id"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm := views.RunVM{
		ID: r.ID, TaskID: r.TaskID, Node: r.Node,
		ScheduledAt: utcText(r.ScheduledAt), StartedAt: utcText(r.StartedAt), EndedAt: utcText(r.EndedAt),
		Duration: durationMS(r.DurationMS), Result: r.Result, Attempt: r.Attempt, Manual: r.Manual, Output: r.Output,
		BinaryOutput: r.BinaryOutput, DelayedID: r.DelayedID,
	}
	if r.HTTPStatus != 0 {
		vm.HTTPStatus = strconv.Itoa(r.HTTPStatus)
	}
	if r.ExitCode != nil {
		vm.ExitCode = strconv.Itoa(*r.ExitCode)
	}
	if t, err := s.m.GetTask(ctx, r.TaskID); err == nil {
		vm.TaskTitle = t.Title
	}
	// A person knows a run by its task and when it ran, not by its UUID.
	title := vm.TaskTitle
	if title == "" {
		title = "Deleted task"
	}
	vm.Heading = title + " · run of " + utcText(r.StartedAt)
	vm.Layout = s.layout(c, vm.Heading, "tasks")
	s.render(c, http.StatusOK, views.RunPage(vm))
}
