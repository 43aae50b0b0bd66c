package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/ldapauth"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Time limits of the master's shutdown.
const (
	httpShutdownTimeout = 15 * time.Second
	masterStopTimeout   = 10 * time.Second
	readHeaderTimeout   = 10 * time.Second
)

// runMaster opens the store, prepares the first start, runs the master engine
// and serves the console until ctx ends.
func runMaster(ctx context.Context, cfg masterConfig, log *slog.Logger) error {
	var tlsCert tls.Certificate
	if cfg.TLS() {
		// Load now: a bad certificate should stop the start, not the first handshake.
		c, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsCert = c
	}

	if cfg.DSN.Dialect == store.SQLite {
		unlock, err := lockSQLite(cfg.DSN.Path)
		if err != nil {
			return err
		}
		defer unlock()
	}
	log.Info("opening database", "db", cfg.DSN.String())
	st, err := store.Open(ctx, cfg.DSN, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close database", "err", err)
		}
	}()
	// SQLite's -wal file stays bounded (store.Checkpointer); a no-op on MySQL.
	ckpt := store.NewCheckpointer(st, cfg.DSN.Path, store.CheckpointConfig{}, log)
	ckpt.Start(ctx)
	defer ckpt.Stop()

	// Bind before registering the master's node: a taken port fails the start
	// without leaving the node marked running.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	advertise := cfg.Advertise
	if advertise == "" {
		advertise = advertiseFor(ln.Addr())
	}

	var directory master.PasswordDirectory // a nil *ldapauth.Directory must stay a nil interface
	if cfg.LDAP != nil {
		d, err := ldapauth.New(*cfg.LDAP)
		if err != nil {
			return err
		}
		directory = d
		log.Info("LDAP sign-in on", "ldap", cfg.LDAP.String())
	}
	m := master.New(master.Config{
		Directory:     directory,
		OIDC:          cfg.OIDC.roles(),
		Identity:      cfg.Identity,
		Cluster:       cfg.Cluster,
		ClusterKey:    cfg.ClusterKey,    // empty: the stored one
		AdminPassword: cfg.AdminPassword, // first start only
		AdvertiseHost: advertise,
		// The engine puts the stored settings over these unless pinned.
		Health: master.HealthConfig{Interval: cfg.HealthInterval, Timeout: cfg.HealthTimeout, MaxFailures: cfg.MaxFailures},
		Pinned: master.Pinned{HealthInterval: cfg.HealthIntervalSet, HealthTimeout: cfg.HealthTimeoutSet, MaxFailures: cfg.MaxFailuresSet},
		// Served at GET /metrics to API token holders.
		Metrics: master.NewMetrics(),
	}, st, log)
	if err := m.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	stopMaster := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), masterStopTimeout)
		defer cancel()
		m.Stop(sctx)
	}

	base := "http://" + advertise
	if cfg.TLS() {
		base = "https://" + advertise
	}
	oidcCfg := cfg.OIDC.handlerOIDC(base)
	if oidcCfg != nil {
		log.Info("OIDC sign-on enabled", "issuer", oidcCfg.Issuer, "client", oidcCfg.ClientID, "redirect", oidcCfg.RedirectURL)
	}
	router, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log, SecureCookies: cfg.TLS(),
		TrustedProxies: cfg.Proxies, OIDC: oidcCfg})
	if err != nil {
		ln.Close()
		stopMaster()
		return fmt.Errorf("build routes: %w", err)
	}
	srv := masterHTTPServer(cfg, router, log)
	scheme := "http"
	if cfg.TLS() {
		scheme = "https"
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{tlsCert}, MinVersion: tls.VersionTLS12}
	}
	serveErr := make(chan error, 1)
	go func() {
		if cfg.TLS() {
			serveErr <- srv.ServeTLS(ln, "", "")
		} else {
			serveErr <- srv.Serve(ln)
		}
	}()
	log.Info("master serving", "url", scheme+"://"+advertise, "listen", ln.Addr().String(), "identity", cfg.Identity)

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("http shutdown", "err", err)
	}
	stopMaster()
	log.Info("master stopped")
	return runErr
}

// Defaults of the master's HTTP server limits. No route streams: the longest
// answer waits on worker calls, which have their own shorter timeouts.
const (
	defReadTimeout    = 30 * time.Second
	defWriteTimeout   = 90 * time.Second
	defIdleTimeout    = 2 * time.Minute
	defMaxHeaderBytes = 64 << 10
)

// masterHTTPServer is the master's server with read, write and idle timeouts
// and a header limit, so trickling or idle clients cannot hold connections.
func masterHTTPServer(cfg masterConfig, h http.Handler, log *slog.Logger) *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(readHeaderTimeout, or(cfg.ReadTimeout, defReadTimeout)),
		ReadTimeout:       or(cfg.ReadTimeout, defReadTimeout),
		WriteTimeout:      or(cfg.WriteTimeout, defWriteTimeout),
		IdleTimeout:       or(cfg.IdleTimeout, defIdleTimeout),
		MaxHeaderBytes:    defMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if cfg.MaxHeaderBytes > 0 {
		srv.MaxHeaderBytes = cfg.MaxHeaderBytes
	}
	return srv
}

// advertiseFor is the host:port workers and the console see for a listener
// bound to addr; an unspecified host becomes 127.0.0.1.
func advertiseFor(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
