package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// apiCreateDelayedBatch answers POST /api/v1/delayed/batch {"tasks":[...]}:
// each delayed task created (or the pending one of its key found) or
// refused on its own, {"results":[{"index","id","ok","created","error",
// "fields"}]} in the order of tasks.
func (s *server) apiCreateDelayedBatch(c *gin.Context) {
	var in struct {
		Tasks []master.DelayedInput `json:"tasks"`
	}
	body, err := readBodyLimit(c, maxBulkBody)
	if err != nil {
		return
	}
	if err := protocol.DecodeStrict(body, &in); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, protocol.ErrorResponse{Error: "invalid JSON body: " + err.Error()})
		return
	}
	results, err := s.m.Delayed().CreateDelayedBatch(c.Request.Context(), in.Tasks, currentUser(c).Name)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"results": results})
}
