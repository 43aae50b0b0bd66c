package handlers

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// NewWorkerRouter lists every route of the worker API.
func NewWorkerRouter(w *worker.Worker, log *slog.Logger) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	wa := &workerAPI{w: w, log: log}
	r.GET(protocol.PathHealth, wa.health)
	r.POST(protocol.PathConnect, wa.connect)
	guarded := r.Group("/api", wa.guard)
	guarded.POST("/server/startup", wa.startup)
	guarded.POST("/server/shutdown", wa.shutdown)
	guarded.POST("/task/start", wa.startTask)
	guarded.POST("/task/stop", wa.stopTask)
	guarded.POST("/task/pause", wa.pauseTask)
	guarded.POST("/task/resume", wa.resumeTask)
	guarded.POST("/task/runonce", wa.runTaskOnce)
	r.NoRoute(func(c *gin.Context) { c.JSON(http.StatusNotFound, protocol.ErrorResponse{Error: "no such route"}) })
	return r
}

type workerAPI struct {
	w   *worker.Worker
	log *slog.Logger
}

// guard lets a request through only with the current sm_secret. The 401 body
// says nothing about either secret.
func (wa *workerAPI) guard(c *gin.Context) {
	if !wa.w.CheckSecret(c.GetHeader(protocol.HeaderSecret)) {
		c.AbortWithStatusJSON(http.StatusUnauthorized, protocol.ErrorResponse{Error: "unauthorized"})
		return
	}
	c.Next()
}
