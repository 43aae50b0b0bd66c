package handlers

import (
	"context"

	"github.com/gin-gonic/gin"
)

// pauseBackfill stops starting a backfill's runs (operators); those in
// progress go on.
func (s *server) pauseBackfill(c *gin.Context) {
	s.backfillAction(c, s.m.Workflows().PauseBackfill, "FlashBackfillPaused")
}

// resumeBackfill starts a paused backfill's runs again (operators).
func (s *server) resumeBackfill(c *gin.Context) {
	s.backfillAction(c, s.m.Workflows().ResumeBackfill, "FlashBackfillResumed")
}

// cancelBackfill ends a backfill (operators): its runs not started are
// cancelled, those in progress go on.
func (s *server) cancelBackfill(c *gin.Context) {
	s.backfillAction(c, s.m.Workflows().CancelBackfill, "FlashBackfillCancelled")
}

// backfillAction does one action to the backfill :id and shows its page
// saying how it went (done: the message of its success).
func (s *server) backfillAction(c *gin.Context, do func(context.Context, string) error, done string) {
	id := c.Param("id")
	err := do(c.Request.Context(), id)
	s.consoleAction(c, err, "/backfills/"+id, "/backfills/"+id, tr(c, done))
}
