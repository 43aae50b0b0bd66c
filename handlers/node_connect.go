package handlers

import (
	"context"

	"github.com/gin-gonic/gin"
)

// connectNode performs the handshake with an offline node.
func (s *server) connectNode(c *gin.Context) {
	s.nodeAction(c, "NodeConnect", func(ctx context.Context, name string) error {
		_, err := s.m.Nodes().Connect(ctx, name)
		return err
	})
}
