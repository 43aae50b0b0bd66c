package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// claimFire handles POST /api/worker/claim (and its old path /api/worker/lock):
// an executor claims one fire.
func (s *server) claimFire(c *gin.Context) {
	node, err := s.m.Authenticate(c.Request.Context(), c.GetHeader(protocol.HeaderNode), c.GetHeader(protocol.HeaderSecret))
	if err != nil {
		s.apiError(c, err)
		return
	}
	var req protocol.ClaimRequest
	if !bindJSON(c, &req) {
		return
	}
	resp, err := s.m.Claim(c.Request.Context(), node, req)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}

// reportRuns handles POST /api/worker/runs: a batch of run reports.
func (s *server) reportRuns(c *gin.Context) {
	node, err := s.m.Authenticate(c.Request.Context(), c.GetHeader(protocol.HeaderNode), c.GetHeader(protocol.HeaderSecret))
	if err != nil {
		s.apiError(c, err)
		return
	}
	body, err := readBodyLimit(c, 80<<20)
	if err != nil {
		return
	}
	var req protocol.RunsRequest
	if err := protocol.DecodeStrict(body, &req); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, protocol.ErrorResponse{Error: "invalid JSON body: " + err.Error()})
		return
	}
	resp, err := s.m.IngestRuns(c.Request.Context(), node, req.Runs)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}
