package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// cancelWorkflowRun cancels a run in progress (operators) and shows it.
func (s *server) cancelWorkflowRun(c *gin.Context) {
	id := c.Param("id")
	err := s.m.Workflows().Cancel(c.Request.Context(), id)
	if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound {
		s.tasksError(c, err)
		return
	}
	if err != nil {
		s.setFlash(c, false, refusal(c, err))
	} else {
		s.setFlash(c, true, tr(c, "FlashWorkflowCancelled"))
	}
	c.Redirect(http.StatusSeeOther, "/workflow-runs/"+id)
}
