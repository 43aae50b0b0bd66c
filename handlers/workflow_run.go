package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// runWorkflow starts a run of a workflow now (operators) and shows it.
func (s *server) runWorkflow(c *gin.Context) {
	id := c.Param("id")
	// Params: one KEY=value per line (the Run now with params form).
	params, perr := form.Pairs(c.PostForm("params"), "=")
	if perr != nil {
		s.setFlash(c, false, refusal(c, protocol.FieldErrors{"params": perr.Error()}))
		c.Redirect(http.StatusSeeOther, "/workflows/"+id)
		return
	}
	r, err := s.m.Workflows().RunNow(c.Request.Context(), id, params)
	if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound {
		s.tasksError(c, err)
		return
	}
	if err != nil {
		s.setFlash(c, false, refusal(c, err))
		c.Redirect(http.StatusSeeOther, "/workflows/"+id)
		return
	}
	s.setFlash(c, true, tr(c, "FlashWorkflowStarted"))
	c.Redirect(http.StatusSeeOther, "/workflow-runs/"+r.ID)
}
