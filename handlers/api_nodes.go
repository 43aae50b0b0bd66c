package handlers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// apiNode is a node in the open API (SPEC section 7); fields may be added, never renamed.
type apiNode struct {
	Name           string     `json:"name"`
	Type           string     `json:"type"`
	Status         int        `json:"status"`
	Host           string     `json:"host"`
	Protocol       string     `json:"protocol"`
	Priority       int        `json:"priority"`
	MaxConcurrency int        `json:"max_concurrency"`
	LastSeen       *time.Time `json:"last_seen"`
	Failures       int        `json:"failures"`
	Mode           string     `json:"mode"`
	Reason         string     `json:"reason"`
	// Labels are the labels in force: the worker's, overridden by the
	// admin's; DeclaredLabels and AdminLabels are the two sides.
	Labels         protocol.Labels `json:"labels"`
	DeclaredLabels protocol.Labels `json:"declared_labels"`
	AdminLabels    protocol.Labels `json:"admin_labels"`
	// PendingLabels are declared labels that wait for an admin's approval
	// (approval on): they select nothing until the node is approved again.
	PendingLabels protocol.Labels `json:"pending_labels"`
	// ClockSkewMS is how far the node's clock is ahead of the master's in
	// milliseconds (negative: behind), as last measured; null when never
	// measured. ClockSkewed says it is off by more than a second, and
	// ClockSkewReason says how ("its clock is 3.2 s ahead of the master's").
	ClockSkewMS     *int64 `json:"clock_skew_ms"`
	ClockSkewed     bool   `json:"clock_skewed"`
	ClockSkewReason string `json:"clock_skew_reason,omitempty"`
}

func toAPINode(n *master.Node) apiNode {
	a := apiNode{
		Name: n.Name, Type: n.Type, Status: int(n.Status), Host: n.Host, Protocol: n.Protocol, Priority: n.Priority,
		MaxConcurrency: n.MaxConcurrency, Failures: n.Failures, Mode: n.Mode, Reason: n.Reason,
		Labels: master.NodeLabels(n), DeclaredLabels: master.DeclaredLabels(n), AdminLabels: master.AdminLabels(n),
		PendingLabels: master.PendingLabels(n),
		ClockSkewed:   master.NodeClockSkewed(n),
	}
	if skew, known := master.NodeClockSkew(n); known {
		ms := skew.Milliseconds()
		a.ClockSkewMS, a.ClockSkewReason = &ms, master.ClockSkewReason(skew)
	}
	if !n.LastSeen.IsZero() {
		t := n.LastSeen.UTC()
		a.LastSeen = &t
	}
	return a
}

// Paging of GET /api/v1/nodes: limit defaults to apiNodesDefaultLimit and
// may be at most apiNodesMaxLimit.
const (
	apiNodesDefaultLimit = 500
	apiNodesMaxLimit     = 1000
)

// apiListNodes answers GET /api/v1/nodes?limit=&offset=&selector= with one
// page of the nodes (by name) as a JSON array; X-Total-Count carries the
// number of all nodes (those the selector selects, when given), so the array
// stays what clients already read.
func (s *server) apiListNodes(c *gin.Context) {
	limit, offset := apiNodesDefaultLimit, 0
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > apiNodesMaxLimit {
			s.apiError(c, protocol.FieldErrors{"limit": fmt.Sprintf("must be a whole number from 1 to %d", apiNodesMaxLimit)})
			return
		}
		limit = n
	}
	if v := c.Query("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.apiError(c, protocol.FieldErrors{"offset": "must be a whole number, 0 or more"})
			return
		}
		offset = n
	}
	ctx := c.Request.Context()
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		s.serverError(c, err)
		return
	}
	if sel, ok := c.GetQuery("selector"); ok && strings.TrimSpace(sel) != "" {
		match, err := s.m.Pools().MatchSelector(ctx, sel)
		if err != nil {
			s.apiError(c, err)
			return
		}
		nodes = selectedNodes(nodes, match)
	}
	c.Header("X-Total-Count", strconv.Itoa(len(nodes)))
	page := nodes[min(offset, len(nodes)):min(offset+limit, len(nodes))]
	out := make([]apiNode, len(page))
	for i := range page {
		out[i] = toAPINode(&page[i])
	}
	c.JSON(http.StatusOK, out)
}

// selectedNodes keeps the nodes a selector's match names, in order.
func selectedNodes(nodes []master.Node, match *master.SelectorMatch) []master.Node {
	in := make(map[string]bool, len(match.Running)+len(match.Others))
	for _, n := range append(slices.Clone(match.Running), match.Others...) {
		in[n] = true
	}
	out := nodes[:0:0]
	for _, n := range nodes {
		if in[n.Name] {
			out = append(out, n)
		}
	}
	return out
}

// apiGetNode answers GET /api/v1/nodes/{name}?health_since=, with its health history.
func (s *server) apiGetNode(c *gin.Context) {
	n, err := s.m.Nodes().Get(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.apiNodeWithHealth(c, n)
}

// apiCreateNodeBody is the body of POST /api/v1/nodes; omitted numbers take defaults.
type apiCreateNodeBody struct {
	Name           string `json:"name"`
	Host           string `json:"host"`
	Protocol       string `json:"protocol"`
	Priority       *int   `json:"priority"`
	MaxConcurrency *int   `json:"max_concurrency"`
	// Labels, when given, are the node's admin labels.
	Labels protocol.Labels `json:"labels"`
}

// apiCreateNode answers POST /api/v1/nodes with the new manual node.
func (s *server) apiCreateNode(c *gin.Context) {
	var b apiCreateNodeBody
	if !bindJSON(c, &b) {
		return
	}
	cfg := protocol.NodeConfig{Name: b.Name, Host: b.Host, Protocol: b.Protocol, Priority: 1, MaxConcurrency: 20}
	if cfg.Protocol == "" {
		cfg.Protocol = "http"
	}
	if b.Priority != nil {
		cfg.Priority = *b.Priority
	}
	if b.MaxConcurrency != nil {
		cfg.MaxConcurrency = *b.MaxConcurrency
	}
	if !s.labelsFit(c, b.Labels) {
		return
	}
	n, err := s.m.Nodes().Create(c.Request.Context(), cfg)
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("node added", "node", n.Name, "user", currentUser(c).Name)
	if b.Labels != nil {
		if n, err = s.m.Nodes().SetLabels(c.Request.Context(), n.Name, b.Labels); err != nil {
			s.apiError(c, err)
			return
		}
	}
	c.JSON(http.StatusCreated, toAPINode(n))
}

func (s *server) apiNodeAction(c *gin.Context, verb string, do func(context.Context, string) (*master.Node, error)) {
	name := c.Param("name")
	n, err := do(c.Request.Context(), name)
	if err != nil {
		s.log.Warn("node action failed", "action", verb, "node", name, "user", currentUser(c).Name, "err", err)
		s.apiError(c, err)
		return
	}
	s.log.Info("node action", "action", verb, "node", name, "user", currentUser(c).Name)
	c.JSON(http.StatusOK, toAPINode(n))
}

// apiConnectNode answers POST /api/v1/nodes/{name}/connect.
func (s *server) apiConnectNode(c *gin.Context) { s.apiNodeAction(c, "connect", s.m.Nodes().Connect) }

// apiEnableNode answers POST /api/v1/nodes/{name}/enable.
func (s *server) apiEnableNode(c *gin.Context) { s.apiNodeAction(c, "enable", s.m.Nodes().Enable) }

// apiDisableNode answers POST /api/v1/nodes/{name}/disable.
func (s *server) apiDisableNode(c *gin.Context) { s.apiNodeAction(c, "disable", s.m.Nodes().Disable) }

// apiDeleteNode answers DELETE /api/v1/nodes/{name} with 204.
func (s *server) apiDeleteNode(c *gin.Context) {
	name := c.Param("name")
	if err := s.m.Nodes().Delete(c.Request.Context(), name); err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("node deleted", "node", name, "user", currentUser(c).Name)
	c.Status(http.StatusNoContent)
}
