package handlers

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/buildinfo"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
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
		Node:      c.GetHeader(protocol.HeaderNode),
		Timestamp: c.GetHeader(protocol.HeaderTimestamp),
		Nonce:     c.GetHeader(protocol.HeaderNonce),
		Signature: c.GetHeader(protocol.HeaderSignature),

		NodeSignature: c.GetHeader(protocol.HeaderNodeSignature),
		RemoteAddr:    c.ClientIP(),
	}
	resp, err := s.m.Register(c.Request.Context(), h, body)
	if err != nil {
		s.log.Warn("registration refused", "node", h.Node, "from", c.ClientIP(), "err", err)
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, resp)
}

// workerTasks handles POST /api/worker/tasks: a page of the tasks of a
// worker that registered with parts. Its deadline grows with the page asked
// for, a second within the worker's own (protocol.PageTimeout).
func (s *server) workerTasks(c *gin.Context) {
	actx, cancel := context.WithTimeout(c.Request.Context(), authDeadline)
	node, err := s.m.Authenticate(actx, c.GetHeader(protocol.HeaderNode), c.GetHeader(protocol.HeaderSecret))
	cancel()
	if err != nil {
		s.apiError(c, err)
		return
	}
	var req protocol.TasksPageRequest
	if !bindJSON(c, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), protocol.PageTimeout(cmp.Or(max(req.Limit, 0), protocol.MaxTaskBatch))-time.Second)
	defer cancel()
	resp, err := s.m.Tasks().Page(ctx, node, req)
	if err != nil {
		s.log.Warn("tasks page refused", "node", node.Name, "from", c.ClientIP(), "err", err)
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
	name := c.GetHeader(protocol.HeaderNode)
	if err := s.m.Offline(c.Request.Context(), name, c.GetHeader(protocol.HeaderSecret)); err != nil {
		s.log.Warn("offline notice refused", "node", name, "from", c.ClientIP(), "err", err)
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "offline"})
}

// masterHealthResponse is a worker's health answer plus whether this master
// holds the cluster lease, for load balancers and operators.
type masterHealthResponse struct {
	protocol.HealthResponse
	Leader bool `json:"leader"`
}

// masterHealth answers probes of the master itself.
func (s *server) masterHealth(c *gin.Context) {
	build := buildinfo.Get()
	c.JSON(http.StatusOK, masterHealthResponse{
		HealthResponse: protocol.HealthResponse{Node: s.m.Identity(), BootID: s.m.BootID(), Status: protocol.StateScheduling, Version: &build},
		Leader:         s.m.IsLeader(),
	})
}

// masterReady answers readiness probes: 200 while the database answers and
// this master is not fenced, else 503 with the reason. /health stays 200 as
// long as the process serves.
func (s *server) masterReady(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	if err := s.m.Ready(c.Request.Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		c.Header("Retry-After", dbRetryAfter)
		c.JSON(http.StatusServiceUnavailable, gin.H{"ready": false, "error": master.Message(err)})
		return
	}
	c.JSON(http.StatusOK, gin.H{"ready": true, "node": s.m.Identity()})
}
