package worker

import (
	"log/slog"
	"net/http"
	"time"
)

// ServerTimeouts bound how long the worker's server waits for a client: a
// trickling or idle connection is cut instead of holding a descriptor.
type ServerTimeouts struct {
	ReadHeader     time.Duration // request line and headers
	Read           time.Duration // the whole request, body included
	Write          time.Duration // from the end of the headers to the end of the answer
	Idle           time.Duration // keep-alive between requests
	MaxHeaderBytes int
}

// DefaultServerTimeouts fit the worker API: small requests, answers within a
// shutdown's bounded wait (30 s), startup bodies of many tasks on a LAN.
func DefaultServerTimeouts() ServerTimeouts {
	return ServerTimeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second,
		Idle: 120 * time.Second, MaxHeaderBytes: 64 << 10}
}

// NewServer is the worker API's http.Server (NewHandler) with timeouts t.
func NewServer(w *Worker, log *slog.Logger, t ServerTimeouts) *http.Server {
	return &http.Server{
		Handler:           NewHandler(w, log),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
