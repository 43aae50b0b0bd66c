package handlers

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// apiPauseWorkflow answers POST /api/v1/workflows/{id}/pause (project
// operators): the schedule stops; runs in progress go on.
func (s *server) apiPauseWorkflow(c *gin.Context) {
	s.apiWorkflowAction(c, s.m.Workflows().Pause)
}

// apiResumeWorkflow answers POST /api/v1/workflows/{id}/resume: the
// schedule goes on from now.
func (s *server) apiResumeWorkflow(c *gin.Context) {
	s.apiWorkflowAction(c, s.m.Workflows().Resume)
}

// apiWorkflowAction runs act on the workflow of the path and answers the
// workflow as it is then.
func (s *server) apiWorkflowAction(c *gin.Context, act func(ctx context.Context, id string) error) {
	ctx, id := c.Request.Context(), c.Param("id")
	if err := act(ctx, id); err != nil {
		s.apiError(c, err)
		return
	}
	w, err := s.m.Workflows().Get(ctx, id)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, w)
}

// apiBackfillWorkflow answers POST /api/v1/workflows/{id}/backfills
// (project operators): a run for every fire of the schedule in a past
// window.
func (s *server) apiBackfillWorkflow(c *gin.Context) {
	var in master.BackfillInput
	if !bindJSON(c, &in) {
		return
	}
	b, err := s.m.Workflows().BackfillWorkflow(c.Request.Context(), c.Param("id"), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, b)
}

// apiBackfillTask answers POST /api/v1/tasks/{id}/backfills (project
// operators): a one-step run of the task for every fire of its schedule
// in a past window.
func (s *server) apiBackfillTask(c *gin.Context) {
	var in master.BackfillInput
	if !bindJSON(c, &in) {
		return
	}
	b, err := s.m.Workflows().BackfillTask(c.Request.Context(), c.Param("id"), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, b)
}

// apiListWorkflowBackfills answers GET /api/v1/workflows/{id}/backfills.
func (s *server) apiListWorkflowBackfills(c *gin.Context) {
	s.apiListBackfills(c, c.Param("id"), "")
}

// apiListTaskBackfills answers GET /api/v1/tasks/{id}/backfills.
func (s *server) apiListTaskBackfills(c *gin.Context) {
	s.apiListBackfills(c, "", c.Param("id"))
}

func (s *server) apiListBackfills(c *gin.Context, workflowID, taskID string) {
	bs, err := s.m.Workflows().Backfills(c.Request.Context(), workflowID, taskID)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": bs})
}

// apiGetBackfill answers GET /api/v1/backfills/{id}: a backfill, its
// progress and its runs.
func (s *server) apiGetBackfill(c *gin.Context) {
	b, err := s.m.Workflows().Backfill(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}

// apiPauseBackfill answers POST /api/v1/backfills/{id}/pause.
func (s *server) apiPauseBackfill(c *gin.Context) {
	s.apiBackfillAction(c, s.m.Workflows().PauseBackfill)
}

// apiResumeBackfill answers POST /api/v1/backfills/{id}/resume.
func (s *server) apiResumeBackfill(c *gin.Context) {
	s.apiBackfillAction(c, s.m.Workflows().ResumeBackfill)
}

// apiCancelBackfill answers POST /api/v1/backfills/{id}/cancel: its runs
// not started are cancelled.
func (s *server) apiCancelBackfill(c *gin.Context) {
	s.apiBackfillAction(c, s.m.Workflows().CancelBackfill)
}

// apiBackfillAction runs act on the backfill of the path and answers the
// backfill as it is then.
func (s *server) apiBackfillAction(c *gin.Context, act func(ctx context.Context, id string) error) {
	ctx, id := c.Request.Context(), c.Param("id")
	if err := act(ctx, id); err != nil {
		s.apiError(c, err)
		return
	}
	b, err := s.m.Workflows().Backfill(ctx, id)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}
