package handlers

import (
	"context"

	"github.com/gin-gonic/gin"
)

// disableNode stops scheduling on a running node.
func (s *server) disableNode(c *gin.Context) {
	s.nodeAction(c, "NodeDisable", func(ctx context.Context, name string) error {
		_, err := s.m.Nodes().Disable(ctx, name)
		return err
	})
}
