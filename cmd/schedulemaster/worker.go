package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/worker"
)

// workerHTTPStopTimeout bounds the end of the worker API's server, after
// the worker has drained (--drain-timeout) and stopped.
const workerHTTPStopTimeout = 10 * time.Second

// runWorker serves the worker API, registers with the master (in auto mode)
// and, on ctx end, stops scheduling, tells the master and stops serving.
func runWorker(ctx context.Context, cfg workerConfig, log *slog.Logger) error {
	// A worker is meant to stay small beside the work it runs: ask the GC to
	// keep the heap near 48 MiB unless the operator set GOMEMLIMIT.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(48 << 20)
	}
	host, err := os.Hostname()
	if err != nil {
		log.Warn("no machine name", "err", err)
		host = "unknown"
	}
	cfg.MachineName = host
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockWorkerDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	// Listen first: a taken port fails the start before anything registers, and
	// --port 0 learns the port the kernel picked before announcing it.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if cfg.Port == 0 {
		cfg.Port = ln.Addr().(*net.TCPAddr).Port
	}
	var mln net.Listener // --metrics-listen, bound as early as the API's port
	if cfg.MetricsListen != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s (--metrics-listen): %w", cfg.MetricsListen, err)
		}
	}
	w, err := worker.New(cfg.Config, log)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	defer serveWorkerMetrics(mln, w, log)(ctx)
	timeouts := worker.DefaultServerTimeouts()
	timeouts.Read = cfg.ReadTimeout
	timeouts.ReadHeader = min(timeouts.ReadHeader, cfg.ReadTimeout)
	srv := worker.NewServer(w, log, timeouts)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	mode := "auto"
	if !cfg.AutoRegister {
		mode = "manual"
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	log.Info("worker serving", "listen", ln.Addr().String(), "host", cfg.Host(), "identity", cfg.Identity,
		"master", cfg.MasterURL, "registration", mode, "allow_shell", cfg.AllowShell, "allow_types", strings.Join(cfg.AllowTypes, ","), "labels", cfg.Labels.String(),
		"drain_timeout", cfg.StopTimeout)

	// Run starts the worker (and registers it); it ends with Stop below,
	// which first ends a registration still retrying, so that going offline
	// and registering cannot cross.
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = w.Run(context.WithoutCancel(ctx)) // Stop's answer is logged below
	}()

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	}
	// The drain gives the runs in progress --drain-timeout; the rest of the
	// stop (reports, the offline call) has StopSlack.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.StopTimeout+worker.StopSlack)
	defer cancel()
	if err := w.Stop(sctx); err != nil {
		// The master will notice through failed health probes instead.
		log.Error("graceful stop incomplete", "err", err)
	}
	<-ran
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), workerHTTPStopTimeout)
	defer hcancel()
	if err := srv.Shutdown(hctx); err != nil {
		log.Error("http shutdown", "err", err)
	}
	log.Info("worker stopped")
	return runErr
}

// serveWorkerMetrics serves the worker's Prometheus metrics at /metrics on
// ln (nil: nothing), without the secret, until the returned stop is called.
func serveWorkerMetrics(ln net.Listener, w *worker.Worker, log *slog.Logger) (stop func(context.Context)) {
	if ln == nil {
		return func(context.Context) {}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", worker.MetricsHandler(w))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "listen", ln.Addr().String(), "path", "/metrics")
	return func(ctx context.Context) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Error("metrics server shutdown", "err", err)
		}
		<-done
	}
}
