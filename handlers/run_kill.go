package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// killRun kills a run in progress from its page and shows the outcome there.
func (s *server) killRun(c *gin.Context) {
	id := c.Param("id")
	ok, status, msg := true, http.StatusOK, tr(c, "FlashKillSent")
	if err := s.m.Runs().Kill(c.Request.Context(), id); err != nil {
		if status = errorStatus(err); status == 0 || status == http.StatusForbidden || status == http.StatusNotFound {
			s.fail(c, err)
			return
		}
		ok, msg = false, tr(c, "FlashKillFailed", "Reason", refusal(c, err))
		s.log.Warn("run kill refused", "run", id, "user", currentUser(c).Name, "err", err)
	}
	if !isHX(c) {
		s.setFlash(c, ok, msg)
		c.Redirect(http.StatusSeeOther, "/runs/"+id)
		return
	}
	vm, err := s.runVM(c, id, &views.Flash{OK: ok, Message: msg})
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, status, views.RunPanel(vm))
}

// apiKillRun answers POST /api/v1/runs/{id}/kill: 202 when the kill reached
// the run's worker (the run ends as killed), 404 for an unknown run, 409
// for a run that is not in progress, 502 when its worker cannot be reached.
func (s *server) apiKillRun(c *gin.Context) {
	id := c.Param("id")
	if err := s.m.Runs().Kill(c.Request.Context(), id); err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"id": id, "status": "killing"})
}

// apiRunOutput answers GET /api/v1/runs/{id}/output: a run's output, so far
// while it is in progress (from its worker), final once it ended.
func (s *server) apiRunOutput(c *gin.Context) {
	live, err := s.m.Runs().Live(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	r := live.Run
	out := gin.H{"id": r.ID, "result": r.Result, "in_progress": live.InProgress(), "output": r.Output,
		"binary_output": r.BinaryOutput}
	if p := live.Progress; p != nil {
		out["output"], out["binary_output"], out["output_bytes"] = p.Output, p.BinaryOutput, p.OutputBytes
		if p.Waiting != "" {
			out["waiting"] = p.Waiting
		}
		if p.Killing {
			out["killing"] = true
		}
	}
	if live.Unreachable != "" {
		out["unavailable"] = live.Unreachable
	}
	c.JSON(http.StatusOK, out)
}
