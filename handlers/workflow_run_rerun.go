package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// rerunWorkflowRun runs an ended run's failed steps again (operators) and
// shows the new run.
func (s *server) rerunWorkflowRun(c *gin.Context) {
	id := c.Param("id")
	r, err := s.m.Workflows().RerunFailed(c.Request.Context(), id)
	if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound {
		s.tasksError(c, err)
		return
	}
	if err != nil {
		s.setFlash(c, false, refusal(c, err))
		c.Redirect(http.StatusSeeOther, "/workflow-runs/"+id)
		return
	}
	s.setFlash(c, true, tr(c, "FlashWorkflowRerun"))
	c.Redirect(http.StatusSeeOther, "/workflow-runs/"+r.ID)
}
