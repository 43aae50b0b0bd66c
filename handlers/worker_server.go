package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// startup starts scheduling the tasks in the body.
func (wa *workerAPI) startup(c *gin.Context) {
	var req protocol.StartupRequest
	if !bindWorkerJSON(c, &req, protocol.MaxStartupBody) {
		return
	}
	if err := wa.w.Startup(c.Request.Context(), req); err != nil {
		wa.log.Error("startup", "err", err)
		c.JSON(http.StatusInternalServerError, protocol.ErrorResponse{Error: err.Error()})
		return
	}
	c.JSON(http.StatusOK, wa.w.Health())
}

// shutdown stops scheduling and waits (bounded) for running jobs.
func (wa *workerAPI) shutdown(c *gin.Context) {
	if err := wa.w.Shutdown(c.Request.Context()); err != nil {
		wa.log.Error("shutdown", "err", err)
		c.JSON(http.StatusInternalServerError, protocol.ErrorResponse{Error: err.Error()})
		return
	}
	c.JSON(http.StatusOK, wa.w.Health())
}
