package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// connectionTestBody is the body of POST /api/v1/connections/{id}/test:
// the worker to try it on (optional: the first running one the
// connection's project may use).
type connectionTestBody struct {
	Node string `json:"node,omitempty"`
}

// apiListConnections answers GET /api/v1/connections: the connections of
// the projects whoever asks reads and those for every project; ?project=
// narrows it to one project's. Secrets are masked.
func (s *server) apiListConnections(c *gin.Context) {
	list, err := s.m.Connections().List(c.Request.Context(), c.Query("project"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"items": list})
}

// apiCreateConnection answers POST /api/v1/connections (project owners;
// cluster admins for all_projects).
func (s *server) apiCreateConnection(c *gin.Context) {
	var in master.ConnectionInput
	if !bindJSON(c, &in) {
		return
	}
	out, err := s.m.Connections().Create(c.Request.Context(), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(int(out.Version)))
	c.JSON(http.StatusCreated, out)
}

// apiGetConnection answers GET /api/v1/connections/{id}.
func (s *server) apiGetConnection(c *gin.Context) {
	out, err := s.m.Connections().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(int(out.Version)))
	c.JSON(http.StatusOK, out)
}

// apiUpdateConnection answers PUT /api/v1/connections/{id}: If-Match (or
// "version") names the version the edit started from; a secret of
// "********" keeps the stored one.
func (s *server) apiUpdateConnection(c *gin.Context) {
	var in master.ConnectionInput
	if !bindJSON(c, &in) {
		return
	}
	version := in.Version
	if v, err := ifMatchVersion(c); err != nil {
		s.apiError(c, err)
		return
	} else if v != 0 {
		version = int64(v)
	}
	out, err := s.m.Connections().Update(c.Request.Context(), c.Param("id"), in, version)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.Header("ETag", taskETag(int(out.Version)))
	c.JSON(http.StatusOK, out)
}

// apiDeleteConnection answers DELETE /api/v1/connections/{id}; a
// connection tasks use is refused.
func (s *server) apiDeleteConnection(c *gin.Context) {
	if err := s.m.Connections().Delete(c.Request.Context(), c.Param("id")); err != nil {
		s.apiError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// apiTestConnection answers POST /api/v1/connections/{id}/test: a worker
// tries the connection and says what the system answered.
func (s *server) apiTestConnection(c *gin.Context) {
	var in connectionTestBody
	if c.Request.ContentLength != 0 && !bindJSON(c, &in) {
		return
	}
	out, err := s.m.Connections().Test(c.Request.Context(), c.Param("id"), in.Node)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}
