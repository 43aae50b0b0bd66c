package handlers

import (
	"context"

	"github.com/gin-gonic/gin"
)

// approveNode lets a node that waits for approval in.
func (s *server) approveNode(c *gin.Context) {
	s.nodeAction(c, "NodeApprove", func(ctx context.Context, name string) error {
		_, err := s.m.Nodes().Approve(ctx, name)
		return err
	})
}

// apiApproveNode answers POST /api/v1/nodes/{name}/approve: 200 with the
// node, also when it was approved already; 404 for an unknown name.
func (s *server) apiApproveNode(c *gin.Context) { s.apiNodeAction(c, "approve", s.m.Nodes().Approve) }
