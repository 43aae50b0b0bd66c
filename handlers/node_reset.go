package handlers

import (
	"context"

	"github.com/gin-gonic/gin"
)

// resetNode handles POST /nodes/:name/reset-identity: an admin clears a
// node's key so a replaced machine can register the name again.
func (s *server) resetNode(c *gin.Context) {
	s.nodeAction(c, "NodeResetIdentityOf", func(ctx context.Context, name string) error {
		_, err := s.m.Nodes().ResetIdentity(ctx, name)
		return err
	})
}

// apiResetNode answers POST /api/v1/nodes/{name}/reset-identity with the node.
func (s *server) apiResetNode(c *gin.Context) {
	s.apiNodeAction(c, "reset identity", s.m.Nodes().ResetIdentity)
}
