package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// runNowBody is the body of POST /api/v1/workflows/{id}/run: params over
// the workflow's defaults (optional).
type runNowBody struct {
	Params map[string]string `json:"params,omitempty"`
}

// apiListWorkflows answers GET /api/v1/workflows: the workflows whoever
// asks may read, by title, each with its latest run; ?q= keeps those whose
// title or key holds it.
func (s *server) apiListWorkflows(c *gin.Context) {
	ws, err := s.m.Workflows().List(c.Request.Context(), c.Query("q"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": ws})
}

// apiCreateWorkflow answers POST /api/v1/workflows (project editors).
func (s *server) apiCreateWorkflow(c *gin.Context) {
	var in master.WorkflowInput
	if !bindJSON(c, &in) {
		return
	}
	w, err := s.m.Workflows().Create(c.Request.Context(), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, w)
}

// apiGetWorkflow answers GET /api/v1/workflows/{id}.
func (s *server) apiGetWorkflow(c *gin.Context) {
	w, err := s.m.Workflows().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(w.Version))
	c.JSON(http.StatusOK, w)
}

// apiUpdateWorkflow answers PUT /api/v1/workflows/{id} (project editors):
// If-Match (or "version") names the version the edit started from.
func (s *server) apiUpdateWorkflow(c *gin.Context) {
	var in master.WorkflowInput
	if !bindJSON(c, &in) {
		return
	}
	if v, err := ifMatchVersion(c); err != nil {
		s.apiError(c, err)
		return
	} else if v != 0 {
		in.Version = v
	}
	w, err := s.m.Workflows().Update(c.Request.Context(), c.Param("id"), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(w.Version))
	c.JSON(http.StatusOK, w)
}

// apiDeleteWorkflow answers DELETE /api/v1/workflows/{id} (project
// editors); its runs stay readable.
func (s *server) apiDeleteWorkflow(c *gin.Context) {
	if err := s.m.Workflows().Delete(c.Request.Context(), c.Param("id")); err != nil {
		s.apiError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// apiRunWorkflow answers POST /api/v1/workflows/{id}/run (project
// operators): a run now, with params.
func (s *server) apiRunWorkflow(c *gin.Context) {
	var b runNowBody
	if c.Request.ContentLength != 0 && !bindJSON(c, &b) {
		return
	}
	r, err := s.m.Workflows().RunNow(c.Request.Context(), c.Param("id"), b.Params)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, r)
}

// apiListWorkflowRuns answers GET /api/v1/workflows/{id}/runs: its runs,
// newest first, without their steps.
func (s *server) apiListWorkflowRuns(c *gin.Context) {
	rs, err := s.m.Workflows().Runs(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": rs})
}

// apiGetWorkflowRun answers GET /api/v1/workflow-runs/{id}: a run and the
// state of each step.
func (s *server) apiGetWorkflowRun(c *gin.Context) {
	r, err := s.m.Workflows().Run(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

// apiCancelWorkflowRun answers POST /api/v1/workflow-runs/{id}/cancel
// (project operators).
func (s *server) apiCancelWorkflowRun(c *gin.Context) {
	ctx := c.Request.Context()
	id := c.Param("id")
	if err := s.m.Workflows().Cancel(ctx, id); err != nil {
		s.apiError(c, err)
		return
	}
	r, err := s.m.Workflows().Run(ctx, id)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

// apiRerunWorkflowRun answers POST /api/v1/workflow-runs/{id}/rerun
// (project operators): a new run of an ended run's steps that did not
// succeed and those after them, keeping the successful ones.
func (s *server) apiRerunWorkflowRun(c *gin.Context) {
	r, err := s.m.Workflows().RerunFailed(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, r)
}
