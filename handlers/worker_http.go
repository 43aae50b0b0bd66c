package handlers

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// WorkerTimeouts bound how long the worker's server waits for a client: a
// trickling or idle connection is cut instead of holding a descriptor.
type WorkerTimeouts struct {
	ReadHeader     time.Duration // request line and headers
	Read           time.Duration // the whole request, body included
	Write          time.Duration // from the end of the headers to the end of the answer
	Idle           time.Duration // keep-alive between requests
	MaxHeaderBytes int
}

// DefaultWorkerTimeouts fit the worker API: small requests, answers within a
// shutdown's bounded wait (30 s), startup bodies of many tasks on a LAN.
func DefaultWorkerTimeouts() WorkerTimeouts {
	return WorkerTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second,
		Idle: 120 * time.Second, MaxHeaderBytes: 64 << 10}
}

// NewWorkerServer is the worker API's http.Server with timeouts t.
func NewWorkerServer(w *worker.Worker, log *slog.Logger, t WorkerTimeouts) *http.Server {
	return &http.Server{
		Handler:           NewWorkerRouter(w, log),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// bindWorkerJSON decodes a JSON body of at most limit bytes (413 past it,
// before any parsing) with unknown fields refused, answering 400 itself on
// failure.
func bindWorkerJSON(c *gin.Context, v any, limit int64) bool {
	if c.Request.ContentLength > limit {
		c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, protocol.ErrorResponse{Error: "request body too large"})
		return false
	}
	body, err := readBodyLimit(c, limit)
	if err != nil {
		return false
	}
	if err := decodeStrict(body, v); err != nil {
		c.AbortWithStatusJSON(http.StatusBadRequest, protocol.ErrorResponse{Error: "invalid JSON body: " + err.Error()})
		return false
	}
	return true
}
