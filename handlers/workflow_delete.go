package handlers

import (
	"github.com/gin-gonic/gin"
)

// deleteWorkflow deletes a workflow (editors) and shows the list; its runs
// stay readable, and those in progress go on.
func (s *server) deleteWorkflow(c *gin.Context) {
	id := c.Param("id")
	ctx := c.Request.Context()
	w, err := s.m.Workflows().Get(ctx, id)
	title := id
	if err == nil {
		title = w.Title
		err = s.m.Workflows().Delete(ctx, id)
	}
	s.consoleAction(c, err, "/workflows/"+id, "/workflows", tr(c, "FlashWorkflowDeleted", "Title", title))
}
