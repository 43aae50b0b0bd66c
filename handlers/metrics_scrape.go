package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// scrapeMetrics answers GET /metrics with the master's Prometheus metrics;
// a master run without metrics answers 404.
func (s *server) scrapeMetrics(c *gin.Context) {
	if s.metrics == nil {
		c.JSON(http.StatusNotFound, protocol.ErrorResponse{Error: "this master serves no metrics"})
		return
	}
	s.metrics.ServeHTTP(c.Writer, c.Request)
}
