package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// detectEnv is a started master (health checker running) served on loopback.
type detectEnv struct {
	st  *store.Store
	m   *master.Master
	srv *httptest.Server
	hc  master.HealthConfig
	dir string
}

func (b *bench) newDetectEnv(ctx context.Context, dir string, hc master.HealthConfig) (*detectEnv, error) {
	log, _ := b.newLogger()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	st, err := openSQLite(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	m := master.New(master.Config{Identity: "master", ClusterKey: benchClusterKey, AdvertiseHost: "127.0.0.1:1", Health: hc}, st, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		st.Close()
		return nil, err
	}
	srv := httptest.NewServer(h)
	if err := m.Start(ctx); err != nil {
		srv.Close()
		st.Close()
		return nil, err
	}
	return &detectEnv{st: st, m: m, srv: srv, hc: m.HealthConfig(), dir: dir}, nil
}

func (e *detectEnv) Close() {
	e.m.Stop(context.Background())
	e.srv.Close()
	e.st.Close()
}

// waitNode polls the node until cond holds.
func (e *detectEnv) waitNode(ctx context.Context, name string, timeout time.Duration, cond func(*store.Node) bool) (*store.Node, error) {
	deadline := time.Now().Add(timeout)
	for {
		n, err := store.GetNode(ctx, e.st.DB, name)
		if err == nil && cond(n) {
			return n, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("node %s: status %d, failures %d, reason %q", name, n.Status, n.Failures, n.Reason)
			}
			return nil, fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// detectOnce starts a real worker engine that registers with the master,
// waits for a successful probe, then kills it (crash: its port refuses
// connections; hang: it accepts and never answers) right after that probe, the
// worst phase, and measures the time until the master marks it offline.
func (b *bench) detectOnce(ctx context.Context, e *detectEnv, name string, hang bool) (time.Duration, error) {
	log, _ := b.newLogger()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	w, err := worker.New(worker.Config{
		Identity: name, Protocol: "http", IP: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Priority: 1, MaxConcurrency: 5,
		MasterURL: e.srv.URL, ClusterKey: benchClusterKey, AutoRegister: true, DataDir: filepath.Join(e.dir, name),
		StopTimeout: time.Second,
	}, log)
	if err != nil {
		ln.Close()
		return 0, err
	}
	var hung atomic.Bool
	api := worker.NewHandler(w, log)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			<-r.Context().Done()
			return
		}
		api.ServeHTTP(rw, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		srv.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer scancel()
		_ = w.Stop(sctx)
	}()
	go w.Run(runCtx)

	wait := 3*e.hc.Interval + 2*e.hc.Timeout + 10*time.Second
	n, err := e.waitNode(ctx, name, wait, func(n *store.Node) bool { return n.Status == store.StatusRunning })
	if err != nil {
		return 0, fmt.Errorf("worker did not register: %w", err)
	}
	seen := n.LastSeen
	if _, err := e.waitNode(ctx, name, wait, func(n *store.Node) bool { return n.LastSeen.After(seen) }); err != nil {
		return 0, fmt.Errorf("no successful probe: %w", err)
	}
	t0 := time.Now()
	if hang {
		hung.Store(true)
	} else {
		srv.Close()
	}
	bound := time.Duration(e.hc.MaxFailures)*e.hc.Interval + e.hc.Timeout
	if _, err := e.waitNode(ctx, name, 2*bound+10*time.Second, func(n *store.Node) bool { return n.Status == store.StatusOffline }); err != nil {
		return 0, fmt.Errorf("not detected: %w", err)
	}
	return time.Since(t0), nil
}

func (b *bench) detectScenario(ctx context.Context) []row {
	var rows []row
	type variant struct {
		label string
		hc    master.HealthConfig
		runs  int
	}
	variants := []variant{{"1 s interval, 500 ms timeout", master.HealthConfig{Interval: time.Second, Timeout: 500 * time.Millisecond, MaxFailures: 3}, b.opt.Runs}}
	if b.opt.Short {
		rows = append(rows, row{"dead worker detected (defaults: 10 s × 3 + 3 s)", "skipped in -short", "≤ 33 s", Skip})
	} else {
		variants = append([]variant{{"defaults: 10 s interval, 3 s timeout", master.HealthConfig{}, b.opt.Runs}}, variants...)
	}
	for vi, v := range variants {
		e, err := b.newDetectEnv(ctx, filepath.Join(b.tmp, fmt.Sprintf("detect%d", vi)), v.hc)
		if err != nil {
			rows = append(rows, errRow("dead worker detected ("+v.label+")", err))
			continue
		}
		hc := e.hc
		bound := time.Duration(hc.MaxFailures)*hc.Interval + hc.Timeout
		target := fmt.Sprintf("≤ %s × %d + %s = %s", fmtDur(hc.Interval), hc.MaxFailures, fmtDur(hc.Timeout), fmtDur(bound))
		for _, hang := range []bool{false, true} {
			kind := "process gone: connection refused"
			if hang {
				kind = "hung: accepts, never answers"
			}
			name := fmt.Sprintf("dead worker detected (%s; %s)", v.label, kind)
			var took []time.Duration
			var ferr error
			for i := 0; i < v.runs; i++ {
				d, err := b.detectOnce(ctx, e, fmt.Sprintf("dw%d%d%d", vi, btoi(hang), i), hang)
				if err != nil {
					ferr = err
					break
				}
				took = append(took, d)
			}
			if ferr != nil {
				rows = append(rows, errRow(name, ferr))
				continue
			}
			med := medianDur(took)
			fig := fmt.Sprintf("%.3f s after the kill (killed right after a good probe; max %.3f s; median %+d ms vs the bound)",
				med.Seconds(), maxDur(took).Seconds(), (med - bound).Milliseconds())
			rows = append(rows, row{name, fig, target, verdict(med <= bound)})
		}
		e.Close()
	}
	return rows
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}
