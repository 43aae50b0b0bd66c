package docs

// The pages of docs/reference/ are generated, never written by hand: the
// metrics from the master's and the worker's own registries, the API routes
// from the OpenAPI document (handlers/openapi.json), and the flags (in
// cmd/schedulemaster, whose option table only package main can read). Each
// test fails while its committed page differs from what it generates;
// regenerate them all with
//
//	SM_UPDATE_REFERENCE=1 go test ./docs ./cmd/schedulemaster -run TestReference

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// updateReferenceEnv, set to 1, makes the reference tests write their pages
// instead of comparing them.
const updateReferenceEnv = "SM_UPDATE_REFERENCE"

// regenerateCommand is what a stale page tells its reader to run.
const regenerateCommand = "SM_UPDATE_REFERENCE=1 go test ./docs ./cmd/schedulemaster -run TestReference"

// generatedNote opens every generated page; TestReferencePagesAreGenerated
// looks for it.
const generatedNote = "Generated; do not edit. Regenerate with `" + regenerateCommand + "`."

// checkGenerated writes docs/reference/name when SM_UPDATE_REFERENCE=1, else
// fails when the committed page is not want.
func checkGenerated(t *testing.T, name, want string) {
	t.Helper()
	path := filepath.Join("reference", name)
	if os.Getenv(updateReferenceEnv) == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/reference/%s", name)
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("docs/reference/%s: %v; generate it with\n\t%s", name, err, regenerateCommand)
	}
	if string(got) != want {
		t.Errorf("docs/reference/%s is stale (it differs from what the code says); regenerate it with\n\t%s",
			name, regenerateCommand)
	}
}

// cell makes text safe in a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// family is one metric of a reference table.
type family struct {
	name, typ, help string
	labels          []string
}

// families turns gathered metric families into table rows: ours (sm_) and
// the database pool's (go_sql_), which are the same on every platform; the
// Go runtime's and the process's are named in the page's text.
func families(mfs []*dto.MetricFamily) []family {
	var out []family
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "sm_") && !strings.HasPrefix(name, "go_sql_") {
			continue
		}
		f := family{name: name, typ: strings.ToLower(mf.GetType().String()), help: mf.GetHelp()}
		if len(mf.GetMetric()) > 0 {
			for _, l := range mf.GetMetric()[0].GetLabel() {
				f.labels = append(f.labels, l.GetName())
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b family) int { return strings.Compare(a.name, b.name) })
	return out
}

// masterFamilies builds a master the way cmd/schedulemaster does (its own
// metrics given through Config.Metrics, on a store) and gathers them. One
// worker with a measured clock skew makes every metric show.
func masterFamilies(t *testing.T) []family {
	t.Helper()
	ns := storetest.OpenSQLite(t)
	mx := master.NewMetrics()
	master.New(master.Config{Identity: "master", ClusterKey: "reference-cluster-key-0123456789ab", AdvertiseHost: "127.0.0.1:1",
		Metrics: mx, Health: master.HealthConfig{Interval: time.Hour, Timeout: time.Second, MaxFailures: 3}}, ns.Store, storetest.Logger(t))
	ctx := context.Background()
	if err := store.CreateNode(ctx, ns.Store.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Host: "127.0.0.1:1",
		Protocol: "http", Priority: 1, Status: store.StatusIdle}); err != nil {
		t.Fatal(err)
	}
	if err := store.SetClockSkews(ctx, ns.Store.DB, map[string]int64{"w1": 0}, nil); err != nil {
		t.Fatal(err)
	}
	mfs, err := mx.Registry().Gather()
	if err != nil {
		t.Fatalf("gather the master's metrics: %v", err)
	}
	return families(mfs)
}

// workerFamilies builds a worker (worker.New, as the worker command does)
// and scrapes the handler its /metrics serves.
func workerFamilies(t *testing.T) []family {
	t.Helper()
	w, err := worker.New(worker.Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 5,
		MasterURL: "http://127.0.0.1:1", ClusterKey: "reference-cluster-key-0123456789ab", DataDir: t.TempDir()}, storetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	rec := httptest.NewRecorder()
	worker.MetricsHandler(w).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse the worker's metrics: %v", err)
	}
	var mfs []*dto.MetricFamily
	for _, mf := range byName {
		mfs = append(mfs, mf)
	}
	return families(mfs)
}

// metricsTable writes one table of metric families.
func metricsTable(b *strings.Builder, fams []family) {
	b.WriteString("| name | type | labels | help |\n|---|---|---|---|\n")
	for _, f := range fams {
		labels := ""
		for i, l := range f.labels {
			if i > 0 {
				labels += ", "
			}
			labels += "`" + l + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", f.name, f.typ, labels, cell(f.help))
	}
}

// TestReferenceMetrics keeps docs/reference/metrics.md what the master's and
// the worker's registries hold.
func TestReferenceMetrics(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Metrics reference\n\n")
	b.WriteString(generatedNote + "\n\n")
	b.WriteString("Every metric the master and the worker serve, read from their own Prometheus registries. " +
		"Where each is scraped and what to alert on: [Operations](../operations.md#metrics). " +
		"Both also serve the Go runtime's (`go_*`) and the process's (`process_*`) standard metrics.\n\n")
	b.WriteString("## Master\n\nServed at `GET /metrics` of every master (an API token or session of a cluster admin " +
		"or a viewer of every project).\n\n")
	metricsTable(&b, masterFamilies(t))
	b.WriteString("\n## Worker\n\nServed at `GET /metrics` of the worker's API (with its secret) and, with " +
		"`--metrics-listen`, on an address of its own.\n\n")
	metricsTable(&b, workerFamilies(t))
	checkGenerated(t, "metrics.md", b.String())
}

// openAPIDoc is what the routes table reads of handlers/openapi.json.
type openAPIDoc struct {
	Paths map[string]map[string]struct {
		Summary     string   `json:"summary"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		Deprecated  bool     `json:"deprecated"`
		Security    *[]any   `json:"security"`
	} `json:"paths"`
}

// audience says who may call an operation, from what the document says of
// it: no security (open, or the workers' cluster API), cluster admins (and
// viewers of every project), a role in the object's project, or else any
// signed-in user.
func audience(tags []string, security *[]any, description string) (string, error) {
	switch {
	case security != nil && len(*security) == 0 && slices.Contains(tags, "cluster"):
		return "workers (cluster key or node secret)", nil
	case security != nil && len(*security) == 0:
		return "anyone", nil
	case security != nil:
		return "", fmt.Errorf("security %v: the table knows no such requirement", *security)
	case strings.HasPrefix(description, "Cluster admins only."):
		return "cluster admins", nil
	case strings.HasPrefix(description, "Cluster admins and viewers of every project only."):
		return "cluster admins and viewers of every project", nil
	case strings.HasPrefix(description, "Authorized by the caller's role in the object's project"):
		return "a role in the object's project", nil
	}
	return "any signed-in user", nil
}

// TestReferenceAPIRoutes keeps docs/reference/api-routes.md what the
// OpenAPI document says.
func TestReferenceAPIRoutes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "handlers", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("handlers/openapi.json: %v", err)
	}
	paths := make([]string, 0, len(doc.Paths))
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	order := []string{"get", "post", "put", "patch", "delete"}
	var b strings.Builder
	b.WriteString("# API routes\n\n")
	b.WriteString(generatedNote + "\n\n")
	b.WriteString("Every route of the master's JSON API, read from its OpenAPI document, which the master serves " +
		"at `GET /api/v1/openapi.json`. How to authenticate, page and read errors: [Open API](../api.md); " +
		"the roles: [Teams and sign-on](../teams.md). A signed-in user (a session or an API token) sees only " +
		"the objects of the projects they may read: another project's task, run or delayed task answers 404, " +
		"as a missing one; a token limited to a project or a role is held to it.\n\n")
	b.WriteString("| method | path | summary | who may call |\n|---|---|---|---|\n")
	n := 0
	for _, p := range paths {
		ops := doc.Paths[p]
		for m := range ops {
			if !slices.Contains(order, m) {
				t.Errorf("%s %s: the table knows no method %q", strings.ToUpper(m), p, m)
			}
		}
		for _, m := range order {
			op, ok := ops[m]
			if !ok {
				continue
			}
			who, err := audience(op.Tags, op.Security, op.Description)
			if err != nil {
				t.Errorf("%s %s: %v", strings.ToUpper(m), p, err)
			}
			summary := op.Summary
			if op.Deprecated {
				summary += " (deprecated)"
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", strings.ToUpper(m), p, cell(summary), who)
			n++
		}
	}
	if n < 50 {
		t.Fatalf("handlers/openapi.json has %d operations; the document is missing", n)
	}
	checkGenerated(t, "api-routes.md", b.String())
}

// TestReferencePagesAreGenerated holds every page of docs/reference/ to the
// generators: a page none of them writes is refused, so nobody edits one by
// hand believing it stays.
func TestReferencePagesAreGenerated(t *testing.T) {
	want := []string{"api-routes.md", "flags.md", "metrics.md"}
	var got []string
	for _, f := range mdFiles(t, "docs/reference") {
		got = append(got, filepath.Base(f))
		if text := repoFile(t, f); !strings.Contains(text, generatedNote) {
			t.Errorf("%s does not say it is generated (%q)", f, generatedNote)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("docs/reference/ holds %v, want the generated pages %v", got, want)
	}
}
