package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// apiListWorkflowVersions answers GET /api/v1/workflows/{id}/versions: the
// kept versions, newest first, without their definitions.
func (s *server) apiListWorkflowVersions(c *gin.Context) {
	vs, err := s.m.Workflows().Versions(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": vs})
}

// apiGetWorkflowVersion answers GET /api/v1/workflows/{id}/versions/{n}:
// the version's definition and what changed from the one before.
func (s *server) apiGetWorkflowVersion(c *gin.Context) {
	n, err := versionParam(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	v, err := s.m.Workflows().Version(c.Request.Context(), c.Param("id"), n)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// apiRestoreWorkflowVersion answers POST
// /api/v1/workflows/{id}/versions/{n}/restore: the version becomes the
// definition again, as a new version; the answer is the workflow.
func (s *server) apiRestoreWorkflowVersion(c *gin.Context) {
	n, err := versionParam(c)
	if err != nil {
		s.apiError(c, err)
		return
	}
	var b restoreBody
	if c.Request.ContentLength != 0 && !bindJSON(c, &b) {
		return
	}
	w, err := s.m.Workflows().Restore(c.Request.Context(), c.Param("id"), n, b.Note)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(w.Version))
	c.JSON(http.StatusOK, w)
}
