package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// servedMetricNames are the series names a real master and a real worker
// serve: the families of a master's registry (with the collectors that read
// its database) and of a worker's /metrics, histograms with their _bucket,
// _sum and _count, and Prometheus' own "up".
func servedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{"up": true}
	add := func(name string, typ dto.MetricType) {
		names[name] = true
		if typ == dto.MetricType_HISTOGRAM || typ == dto.MetricType_SUMMARY {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[name+s] = true
			}
		}
	}

	st := storetest.OpenSQLite(t).Store
	mx := master.NewMetrics()
	master.New(master.Config{Identity: "dashboard-test", Metrics: mx}, st, storetest.Discard())
	fams, err := mx.Registry().Gather()
	if err != nil {
		t.Fatalf("gather the master's metrics: %v", err)
	}
	for _, f := range fams {
		add(f.GetName(), f.GetType())
	}

	w, err := worker.New(worker.Config{Identity: "dashboard-test", MasterURL: "http://127.0.0.1:9", ClusterKey: "dashboard-test-cluster-key",
		IP: "127.0.0.1", Port: 1, Protocol: "http", DataDir: t.TempDir()}, storetest.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	rec := httptest.NewRecorder()
	worker.MetricsHandler(w).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	types := map[string]dto.MetricType{"counter": dto.MetricType_COUNTER, "gauge": dto.MetricType_GAUGE,
		"histogram": dto.MetricType_HISTOGRAM, "summary": dto.MetricType_SUMMARY, "untyped": dto.MetricType_UNTYPED}
	sc := bufio.NewScanner(rec.Body)
	workerFams := 0
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			add(f[2], types[f[3]])
			workerFams++
		}
	}
	if workerFams == 0 || !names["sm_worker_fires_total"] || !names["sm_master_nodes"] || !names["go_sql_in_use_connections"] {
		t.Fatalf("the served metrics look wrong (%d worker families): %v", workerFams, names)
	}
	return names
}

// dashboardQueries are the PromQL expressions of the Grafana dashboard:
// every panel target and every query variable.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy/helm/schedulemaster/dashboards/schedulemaster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Panels []struct {
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type  string
				Query json.RawMessage
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // the older form: a plain string
		}
		exprs = append(exprs, q.Query)
	}
	return exprs
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	labelValues   = regexp.MustCompile(`\blabel_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)[^)]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promKeywords  = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
	promNumberPfx = regexp.MustCompile(`\d[\d.eE+-]*`)
)

// metricNames are the metric names one PromQL expression selects: what is
// left once strings, label matchers, ranges, groupings and function names
// are taken out (label_values(metric, label) keeps its metric).
func metricNames(expr string) []string {
	expr = labelValues.ReplaceAllString(expr, " $1 ")
	expr = promStrings.ReplaceAllString(expr, " ")
	for promMatchers.MatchString(expr) {
		expr = promMatchers.ReplaceAllString(expr, " ")
	}
	expr = promGrouping.ReplaceAllString(expr, " ")
	expr = promNumberPfx.ReplaceAllString(expr, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" {
			continue // a function
		}
		if !slices.Contains(promKeywords, strings.ToLower(m[0])) {
			names = append(names, m[0])
		}
	}
	return names
}

func TestMetricNamesOfPromQL(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, pool) (rate(sm_worker_trigger_lag_seconds_bucket{job="$worker_job", pool=~"$pool"}[$__rate_interval])))`: {"sm_worker_trigger_lag_seconds_bucket"},
		`sum by (pool) (rate(a_total{result!="x"}[5m])) / sum(rate(b_total[5m])) > 0.5 and on (pool) up`:                                               {"a_total", "b_total", "up"},
		`label_values(sm_worker_runs_total{job="$worker_job"}, pool)`:                                                                                  {"sm_worker_runs_total"},
		`max by (type, status) (sm_master_nodes{job="$master_job"})`:                                                                                   {"sm_master_nodes"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}

// TestDashboardUsesServedMetrics fails when the dashboard names a metric
// that neither a master nor a worker serves (a renamed or removed metric, a
// typo), so the dashboard cannot drift from the code.
func TestDashboardUsesServedMetrics(t *testing.T) {
	t.Parallel()
	served := servedMetricNames(t)
	used := map[string]bool{}
	for _, expr := range dashboardQueries(t) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("no metric found in %q", expr)
		}
		for _, n := range names {
			used[n] = true
			if !served[n] {
				t.Errorf("the dashboard uses %s, which no master or worker serves (in %s)", n, expr)
			}
		}
	}
	// What the dashboard is for: fires, lag, failures, node health, ingest.
	for _, n := range []string{"sm_worker_fires_total", "sm_master_fires_claimed_total", "sm_worker_trigger_lag_seconds_bucket",
		"sm_worker_runs_total", "sm_master_nodes", "sm_master_leader", "sm_master_probe_failures_total",
		"sm_master_runs_ingested_total", "sm_worker_report_queue", "sm_worker_reports_dropped_total"} {
		if !used[n] {
			t.Errorf("the dashboard does not use %s", n)
		}
	}
	t.Logf("the dashboard uses %d metric names, all served", len(used))
}
