package handlers

import (
	"github.com/gin-gonic/gin"
)

// deleteNode removes a node that is not running.
func (s *server) deleteNode(c *gin.Context) {
	s.nodeAction(c, "Delete", s.m.Nodes().Delete)
}
