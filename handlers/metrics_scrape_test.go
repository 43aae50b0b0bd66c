package handlers_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// newEnvWith is newEnv with the master's configuration adjusted by edit.
func newEnvWith(t *testing.T, ns storetest.NamedStore, edit func(*master.Config)) *env {
	t.Helper()
	ctx := storetest.Ctx(t)
	log := storetest.Logger(t)
	cfg := master.Config{PasswordCost: testPasswordCost, Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: 500 * time.Millisecond, MaxFailures: 3}}
	edit(&cfg)
	m := master.New(cfg, ns.Store, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// Stop ends the background work (child runs, claims) before the store closes.
	t.Cleanup(func() { m.Stop(context.Background()) })
	e := &env{t: t, st: ns.Store, m: m, srv: srv}
	e.addUser("admin", "admin-password-1", store.RoleAdmin)
	return e
}

// metricValues is one scrape: sample name with labels -> value.
type metricValues map[string]float64

// value returns a sample, -1 when absent.
func (m metricValues) value(name string) float64 {
	if v, ok := m[name]; ok {
		return v
	}
	return -1
}

// parseMetrics reads the Prometheus text format.
func parseMetrics(t *testing.T, r io.Reader) metricValues {
	t.Helper()
	out := metricValues{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// scrape reads the master's /metrics with the given headers.
func scrape(t *testing.T, e *env, hdr map[string]string) metricValues {
	t.Helper()
	status, body := e.do(e.client(), "GET", "/metrics", "", hdr)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	return parseMetrics(t, strings.NewReader(body))
}

// scrapeWorker reads a worker's /metrics on its API with the given secret.
func scrapeWorker(t *testing.T, host, secret string) (int, metricValues) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+host+"/metrics", nil)
	if secret != "" {
		req.Header.Set(protocol.HeaderSecret, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, parseMetrics(t, resp.Body)
}

// TestMetricsEndpoints: the master's /metrics wants an API token (or a
// session) like the open API, the worker's wants its sm_secret; both serve
// their metric names, and a real task run on two executors (claims, runs
// reported and ingested) moves them.
func TestMetricsEndpoints(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnvWith(t, ns, func(c *master.Config) { c.Metrics = master.NewMetrics() })
		ctx := storetest.Ctx(t)
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
		t.Cleanup(target.Close)
		hosts := map[string]string{}
		for _, name := range []string{"w1", "w2"} {
			w, host := startWorker(t, worker.Config{Identity: name, AutoRegister: true, MasterURL: e.srv.URL})
			runWorker(t, w)
			hosts[name] = host
		}
		anon := e.client()

		// Master: 401 without a token, 200 with one or a session.
		if status, body := e.do(anon, "GET", "/metrics", "", nil); status != http.StatusUnauthorized || !strings.Contains(body, "Bearer") {
			t.Fatalf("anonymous /metrics: %d %s", status, body)
		}
		if status, _ := e.do(anon, "GET", "/metrics", "", map[string]string{"Authorization": "Bearer smt_wrong"}); status != http.StatusUnauthorized {
			t.Fatalf("/metrics with a wrong token: %d", status)
		}
		e.addUser("vic", "viewer-password-1", store.RoleViewer)
		if status, _ := e.do(e.login("vic", "viewer-password-1"), "GET", "/metrics", "", nil); status != http.StatusOK {
			t.Fatalf("/metrics for a viewer's session: %d", status)
		}
		tok := e.bearer("prometheus")
		before := scrape(t, e, tok)
		for _, name := range []string{
			`sm_master_fires_claimed_total`, `sm_master_claims_total{outcome="won"}`, `sm_master_claim_duration_seconds_count`,
			`sm_master_runs_ingested_total{result="success"}`, `sm_master_run_duration_seconds_count{result="failed"}`,
			`sm_master_probe_duration_seconds_count`, `sm_master_probe_failures_total`,
			`sm_master_nodes{status="running",type="worker"}`, `sm_master_leader`,
			`go_sql_open_connections{db_name="schedulemaster"}`, `go_goroutines`,
		} {
			if before.value(name) < 0 {
				t.Errorf("master metrics lack %s", name)
			}
		}
		if got := before.value(`sm_master_nodes{status="running",type="worker"}`); got != 2 {
			t.Errorf("running workers: %v, want 2", got)
		}

		// Workers: 401 without their secret, 200 with it.
		for name, host := range hosts {
			if status, _ := scrapeWorker(t, host, ""); status != http.StatusUnauthorized {
				t.Errorf("%s /metrics without the secret: %d", name, status)
			}
			if status, _ := scrapeWorker(t, host, "wrong"); status != http.StatusUnauthorized {
				t.Errorf("%s /metrics with a wrong secret: %d", name, status)
			}
			status, wm := scrapeWorker(t, host, e.node(name).Secret)
			if status != http.StatusOK {
				t.Fatalf("%s /metrics with its secret: %d", name, status)
			}
			for _, metric := range []string{`sm_worker_fires_total`, `sm_worker_trigger_lag_seconds_count`,
				`sm_worker_runs_total{result="success"}`, `sm_worker_run_duration_seconds_count{result="success"}`,
				`sm_worker_report_queue`, `sm_worker_report_spool_bytes`, `sm_worker_reports_dropped_total`, `go_goroutines`} {
				if wm.value(metric) < 0 {
					t.Errorf("%s metrics lack %s", name, metric)
				}
			}
		}

		// A task on both workers, every second: each fire is claimed once.
		in := master.TaskInput{TaskDef: protocol.TaskDef{Title: "ping", Type: "http",
			Schedule: protocol.Schedule{Kind: "cron", Cron: "* * * * * *"},
			HTTP:     &protocol.HTTPSpec{Method: "GET", URL: target.URL}}, Executors: []string{"w1", "w2"}}
		task, err := e.m.Tasks().Create(ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Start(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		var stored int
		storetest.Eventually(t, 30*time.Second, func() bool {
			_, stored, _ = e.m.Reads().SearchRuns(ctx, store.RunFilter{TaskID: task.ID, Result: store.ResultSuccess})
			return stored >= 2
		}, "two successful runs stored")
		if _, err := e.m.Tasks().Stop(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		after := scrape(t, e, tok)
		won := after.value(`sm_master_fires_claimed_total`) - before.value(`sm_master_fires_claimed_total`)
		if won < 2 || after.value(`sm_master_claims_total{outcome="won"}`) != after.value(`sm_master_fires_claimed_total`) {
			t.Errorf("fires claimed moved by %v, want >= 2 (and claims won equal to it)", won)
		}
		if after.value(`sm_master_claims_total{outcome="lost"}`) < 1 {
			t.Errorf("no claim lost: the second executor of each fire should lose it")
		}
		if got := after.value(`sm_master_claim_duration_seconds_count`) - before.value(`sm_master_claim_duration_seconds_count`); got < 3 {
			t.Errorf("claim latency observed %v times, want >= 3", got)
		}
		// The workers counted the runs they reported.
		var reported float64
		for name, host := range hosts {
			_, wm := scrapeWorker(t, host, e.node(name).Secret)
			reported += wm.value(`sm_worker_runs_total{result="success"}`)
			if wm.value(`sm_worker_run_duration_seconds_count{result="success"}`) != wm.value(`sm_worker_runs_total{result="success"}`) {
				t.Errorf("%s: run durations and runs disagree", name)
			}
		}
		if reported < float64(stored) {
			t.Errorf("workers reported %v successful runs, the master stored %d", reported, stored)
		}
	})
}
