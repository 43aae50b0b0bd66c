package handlers

import (
	"context"

	"github.com/gin-gonic/gin"
)

// enableNode starts scheduling on an idle node.
func (s *server) enableNode(c *gin.Context) {
	s.nodeAction(c, "NodeEnable", func(ctx context.Context, name string) error {
		_, err := s.m.Nodes().Enable(ctx, name)
		return err
	})
}
