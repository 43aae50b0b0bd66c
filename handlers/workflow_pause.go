package handlers

import (
	"github.com/gin-gonic/gin"
)

// pauseWorkflow pauses a workflow's schedule (operators): no fire starts a
// run until it is resumed; runs may still start by hand.
func (s *server) pauseWorkflow(c *gin.Context) {
	id := c.Param("id")
	err := s.m.Workflows().Pause(c.Request.Context(), id)
	s.consoleAction(c, err, "/workflows/"+id, "/workflows/"+id, tr(c, "FlashWorkflowPaused"))
}

// resumeWorkflow starts a paused workflow's schedule again from now
// (operators); the fires of the pause are not run.
func (s *server) resumeWorkflow(c *gin.Context) {
	id := c.Param("id")
	err := s.m.Workflows().Resume(c.Request.Context(), id)
	s.consoleAction(c, err, "/workflows/"+id, "/workflows/"+id, tr(c, "FlashWorkflowResumed"))
}
