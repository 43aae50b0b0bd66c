package handlers

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
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

// reportRuns handles POST /api/worker/runs: a batch of run reports, read
// and stored by the engine (IngestBatch) as the body streams in. A busy
// master answers 429 with Retry-After; the worker keeps the batch and
// delivers it again then.
func (s *server) reportRuns(c *gin.Context) {
	node, err := s.m.Authenticate(c.Request.Context(), c.GetHeader(protocol.HeaderNode), c.GetHeader(protocol.HeaderSecret))
	if err != nil {
		s.apiError(c, err)
		return
	}
	resp, err := s.m.Runs().IngestBatch(c.Request.Context(), node, c.Request.Body, c.Request.ContentLength)
	if master.KindOf(err) == master.KindBusy {
		c.Header("Retry-After", strconv.Itoa(int(master.IngestRetryAfter/time.Second)))
		// Read the unread batch away (bounded, nothing kept), so that the
		// worker gets this answer rather than a connection reset mid-send.
		_, _ = io.Copy(io.Discard, io.LimitReader(c.Request.Body, protocol.MaxRunsBatchBytes))
	}
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}
