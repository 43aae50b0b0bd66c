package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// registerBodyLimit bounds a registration body: a node configuration, a
// secret, a boot id, a machine name and a node key.
const registerBodyLimit = 64 << 10

// registerWorker handles POST /api/worker/register. The MAC covers the raw
// body, so the body is read before it is decoded.
func (s *server) registerWorker(c *gin.Context) {
	body, err := readBodyLimit(c, registerBodyLimit)
	if err != nil {
		return
	}
	h := master.RegisterHeaders{
		Node:      c.GetHeader(worker.HeaderNode),
		Timestamp: c.GetHeader(worker.HeaderTimestamp),
		Nonce:     c.GetHeader(worker.HeaderNonce),
		Signature: c.GetHeader(worker.HeaderSignature),

		NodeSignature: c.GetHeader(worker.HeaderNodeSignature),
	}
	resp, err := s.m.Register(c.Request.Context(), h, body)
	if err != nil {
		s.log.Warn("registration refused", "node", h.Node, "from", c.ClientIP(), "err", err)
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}

// offlineWorker handles POST /api/worker/offline from a worker stopping gracefully.
func (s *server) offlineWorker(c *gin.Context) {
	if _, err := readBody(c); err != nil {
		return
	}
	name := c.GetHeader(worker.HeaderNode)
	if err := s.m.Offline(c.Request.Context(), name, c.GetHeader(worker.HeaderSecret)); err != nil {
		s.log.Warn("offline notice refused", "node", name, "from", c.ClientIP(), "err", err)
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "offline"})
}

// masterHealth answers probes of the master itself.
func (s *server) masterHealth(c *gin.Context) {
	c.JSON(http.StatusOK, worker.HealthResponse{Node: s.m.Identity(), BootID: s.m.BootID(), Status: worker.StateScheduling})
}
