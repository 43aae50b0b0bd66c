package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// apiPatchNodeBody is the body of PATCH /api/v1/nodes/{name}: the fields
// given change, the others keep their values.
type apiPatchNodeBody struct {
	Host           *string `json:"host"`
	Protocol       *string `json:"protocol"`
	Priority       *int    `json:"priority"`
	MaxConcurrency *int    `json:"max_concurrency"`
	// Labels, when given, replace the node's admin labels.
	Labels protocol.Labels `json:"labels"`
}

// apiPatchNode answers PATCH /api/v1/nodes/{name}: an admin's edit of a
// worker node, the only way its priority rises above the default; labels,
// when given, replace its admin labels after the edit.
func (s *server) apiPatchNode(c *gin.Context) {
	var b apiPatchNodeBody
	if !bindJSON(c, &b) {
		return
	}
	if !s.labelsFit(c, b.Labels) {
		return
	}
	name := c.Param("name")
	n, err := s.m.Nodes().Get(c.Request.Context(), name)
	if err != nil {
		s.apiError(c, err)
		return
	}
	cfg := protocol.NodeConfig{Name: n.Name, Host: n.Host, Protocol: n.Protocol, Priority: n.Priority, MaxConcurrency: n.MaxConcurrency}
	if b.Host != nil {
		cfg.Host = *b.Host
	}
	if b.Protocol != nil {
		cfg.Protocol = *b.Protocol
	}
	if b.Priority != nil {
		cfg.Priority = *b.Priority
	}
	if b.MaxConcurrency != nil {
		cfg.MaxConcurrency = *b.MaxConcurrency
	}
	// A body with labels alone changes the labels alone (and records no edit).
	if b.Host != nil || b.Protocol != nil || b.Priority != nil || b.MaxConcurrency != nil || b.Labels == nil {
		n, err = s.m.Nodes().Update(c.Request.Context(), name, cfg)
		if err != nil {
			s.apiError(c, err)
			return
		}
		s.log.Info("node edited", "node", name, "user", currentUser(c).Name)
	}
	if b.Labels != nil {
		if n, err = s.m.Nodes().SetLabels(c.Request.Context(), name, b.Labels); err != nil {
			s.apiError(c, err)
			return
		}
	}
	c.JSON(http.StatusOK, toAPINode(n))
}
