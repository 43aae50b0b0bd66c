package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// openAPI is the served document, compiled on demand.
type openAPI struct {
	t     *testing.T
	doc   map[string]any
	c     *jsonschema.Compiler
	cache map[string]*jsonschema.Schema
	// seen records the operations whose answers were validated.
	seen map[string]bool
}

const openAPIURL = "mem://schedulemaster/openapi.json"

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	raw := handlers.OpenAPIDocument()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	m, _ := doc.(map[string]any)
	if m["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v, want 3.1.0", m["openapi"])
	}
	return &openAPI{t: t, doc: m, c: c, cache: map[string]*jsonschema.Schema{}, seen: map[string]bool{}}
}

// pointer escapes JSON pointer tokens.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

func (o *openAPI) compile(ptr string) *jsonschema.Schema {
	o.t.Helper()
	if s, ok := o.cache[ptr]; ok {
		return s
	}
	s, err := o.c.Compile(openAPIURL + "#" + ptr)
	if err != nil {
		o.t.Fatalf("compile %s: %v", ptr, err)
	}
	o.cache[ptr] = s
	return s
}

func (o *openAPI) get(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, _ := m[k].(map[string]any)
		if next == nil {
			return nil
		}
		m = next
	}
	return m
}

// responseSchema finds the schema of an answer: the operation's own, or the
// shared error answer its $ref names; "" when the document has none.
func (o *openAPI) responseSchema(method, path string, status int, media string) string {
	op := o.get(o.doc, "paths", path, strings.ToLower(method))
	if op == nil {
		return ""
	}
	r := o.get(op, "responses", fmt.Sprint(status))
	if r == nil {
		return ""
	}
	base := pointer("paths", path, strings.ToLower(method), "responses", fmt.Sprint(status))
	if ref, ok := r["$ref"].(string); ok {
		base = strings.TrimPrefix(ref, "#")
		r = o.get(o.doc, strings.Split(strings.TrimPrefix(base, "/"), "/")...)
	}
	if o.get(r, "content", media, "schema") == nil {
		return ""
	}
	return base + pointer("content", media, "schema")
}

// check validates an answer against the document.
func (o *openAPI) check(method, path string, status int, contentType, body string) {
	o.t.Helper()
	media := strings.TrimSpace(strings.Split(contentType, ";")[0])
	if status == http.StatusNoContent {
		if o.get(o.doc, "paths", path, strings.ToLower(method), "responses", "204") == nil {
			o.t.Errorf("%s %s answered 204, which the document does not list", method, path)
		}
		o.seen[method+" "+path] = true
		return
	}
	ptr := o.responseSchema(method, path, status, media)
	if ptr == "" {
		o.t.Errorf("%s %s answered %d %s, which the document does not describe:\n%.500s", method, path, status, media, body)
		return
	}
	var v any
	switch media {
	case "application/yaml":
		var y any
		if err := yaml.Unmarshal([]byte(body), &y); err != nil {
			o.t.Errorf("%s %s: YAML answer: %v", method, path, err)
			return
		}
		js, err := json.Marshal(y)
		if err != nil {
			o.t.Errorf("%s %s: YAML answer as JSON: %v", method, path, err)
			return
		}
		body = string(js)
		fallthrough
	default:
		var err error
		if v, err = jsonschema.UnmarshalJSON(strings.NewReader(body)); err != nil {
			o.t.Errorf("%s %s: answer is not JSON: %v\n%.500s", method, path, err, body)
			return
		}
	}
	if err := o.compile(ptr).Validate(v); err != nil {
		o.t.Errorf("%s %s answered %d against its schema: %v\n%.2000s", method, path, status, err, body)
		return
	}
	o.seen[method+" "+path] = true
}

// ginPath is the document's path of a gin route.
var ginParamRE = regexp.MustCompile(`[:*]([a-z_]+)`)

// routeAliases are gin routes documented under another path: the pools'
// catch-all serves /pools/{key=value}/approve.
var routeAliases = map[string]string{
	"POST /api/v1/pools/*pool":   "POST /api/v1/pools/{pool}/approve",
	"DELETE /api/v1/pools/*pool": "DELETE /api/v1/pools/{pool}/approve",
}

// jsonRoute says whether a route answers JSON: the open API, the cluster
// API and the probes (the console answers pages; /metrics, text).
func jsonRoute(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/health" || path == "/ready"
}

// TestOpenAPICoversRoutes walks the master's router: every JSON route is in
// the document, every operation of the document is a route, and every
// example request body is valid against its schema.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	h, err := handlers.NewMasterRouter(storetest.Ctx(t), handlers.MasterDeps{Master: e.m, Log: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	eng, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("the router is a %T, not a *gin.Engine", h)
	}
	o := loadOpenAPI(t)
	routes := map[string]bool{}
	for _, r := range eng.Routes() {
		if !jsonRoute(r.Path) {
			continue
		}
		key := r.Method + " " + r.Path
		if alias, ok := routeAliases[key]; ok {
			key = alias
		} else {
			key = r.Method + " " + ginParamRE.ReplaceAllString(r.Path, "{$1}")
		}
		routes[key] = true
		method, path, _ := strings.Cut(key, " ")
		if o.get(o.doc, "paths", path, strings.ToLower(method)) == nil {
			t.Errorf("route %s %s is not in openapi.json (as %s)", r.Method, r.Path, key)
		}
	}
	if len(routes) < 50 {
		t.Fatalf("only %d JSON routes found: %v", len(routes), routes)
	}
	paths := o.get(o.doc, "paths")
	examples := 0
	for path, item := range paths {
		for method, op := range item.(map[string]any) {
			key := strings.ToUpper(method) + " " + path
			if !routes[key] {
				t.Errorf("openapi.json names %s, which the router does not serve", key)
			}
			body := o.get(op.(map[string]any), "requestBody", "content", "application/json")
			if body == nil {
				continue
			}
			ex, ok := body["example"]
			if !ok {
				t.Errorf("%s: a request body without an example", key)
				continue
			}
			examples++
			ptr := pointer("paths", path, method, "requestBody", "content", "application/json", "schema")
			if err := o.compile(ptr).Validate(ex); err != nil {
				t.Errorf("%s: the example request is not valid against its schema: %v", key, err)
			}
			// A body the schema refuses must be refused: a field of no
			// schema, and a value of the wrong type.
			bad := map[string]any{"no_such_field": 1}
			if err := o.compile(ptr).Validate(bad); err == nil {
				t.Errorf("%s: the request schema accepts unknown fields", key)
			}
		}
	}
	if examples < 15 {
		t.Fatalf("only %d example requests", examples)
	}
}

// apiCall is one request of TestOpenAPIValidatesAnswers.
type apiCall struct {
	e  *env
	o  *openAPI
	c  *http.Client
	ct string // the request's content type
	// header holds more request headers (If-Match).
	header map[string]string
}

// do sends a request and validates the answer against path's operation;
// it returns the status and body.
func (a *apiCall) do(method, url, path, body string) (int, string) {
	a.e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.e.srv.URL+url, r)
	if err != nil {
		a.e.t.Fatal(err)
	}
	if body != "" {
		ct := a.ct
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range a.header {
		req.Header.Set(k, v)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a.o.check(method, path, resp.StatusCode, resp.Header.Get("Content-Type"), string(b))
	return resp.StatusCode, string(b)
}

// must is do that fails the test unless the status is want.
func (a *apiCall) must(want int, method, url, path, body string) string {
	a.e.t.Helper()
	status, out := a.do(method, url, path, body)
	if status != want {
		a.e.t.Fatalf("%s %s: %d, want %d\n%s", method, url, status, want, out)
	}
	return out
}

// TestOpenAPIValidatesAnswers makes real requests to a master with a worker
// and validates each answer body against the schema of its route and status
// in the document: nodes, tasks, runs, pools, delayed tasks, events, users,
// tokens, export and apply, the probes, and error answers.
func TestOpenAPIValidatesAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	o := loadOpenAPI(t)
	a := &apiCall{e: e, o: o, c: e.login("admin", "admin-password-1")}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	t.Cleanup(target.Close)
	_, host := startWorker(t, worker.Config{Identity: "w1", WorkerOf: "master", AutoRegister: false, Labels: map[string]string{"pool": "billing"}})

	a.must(200, "GET", "/health", "/health", "")
	a.must(200, "GET", "/ready", "/ready", "")
	a.must(200, "GET", "/api/v1/openapi.json", "/api/v1/openapi.json", "")

	// Nodes.
	a.must(201, "POST", "/api/v1/nodes", "/api/v1/nodes", `{"name":"w1","host":"`+host+`","protocol":"http","priority":2,"max_concurrency":7}`)
	a.must(200, "POST", "/api/v1/nodes/w1/connect", "/api/v1/nodes/{name}/connect", "")
	a.must(200, "POST", "/api/v1/nodes/w1/enable", "/api/v1/nodes/{name}/enable", "")
	a.must(200, "GET", "/api/v1/nodes", "/api/v1/nodes", "")
	a.must(200, "GET", "/api/v1/nodes/w1", "/api/v1/nodes/{name}", "")
	a.must(200, "PUT", "/api/v1/nodes/w1/labels", "/api/v1/nodes/{name}/labels", `{"labels":{"pool":"billing","zone":"z1"}}`)
	a.must(200, "PATCH", "/api/v1/nodes/w1", "/api/v1/nodes/{name}", `{"priority":3}`)
	a.must(200, "POST", "/api/v1/nodes/w1/approve", "/api/v1/nodes/{name}/approve", "")
	a.must(404, "GET", "/api/v1/nodes/ghost", "/api/v1/nodes/{name}", "")
	a.must(400, "POST", "/api/v1/nodes", "/api/v1/nodes", `{"name":"w 1","host":"x"}`)
	a.must(200, "GET", "/api/v1/selectors/preview?selector=pool%3Dbilling", "/api/v1/selectors/preview", "")
	a.must(200, "GET", "/api/v1/schedules/preview?kind=cron&cron=0+3+*+*+*&tz=Europe/Berlin&n=3", "/api/v1/schedules/preview", "")
	a.must(400, "GET", "/api/v1/schedules/preview?kind=cron&cron=61+*+*+*+*", "/api/v1/schedules/preview", "")

	// Pools.
	a.must(200, "GET", "/api/v1/pools", "/api/v1/pools", "")
	a.must(200, "GET", "/api/v1/pools/pool=billing", "/api/v1/pools/{pool}", "")
	a.must(200, "POST", "/api/v1/pools/pool=billing/approve", "/api/v1/pools/{pool}/approve", "")
	a.must(204, "DELETE", "/api/v1/pools/pool=billing/approve", "/api/v1/pools/{pool}/approve", "")

	// Tasks and runs.
	task := `{"title":"ping","key":"ping","type":"http","schedule":{"kind":"interval","every":"1h"},
"http":{"method":"POST","url":"` + target.URL + `/?t={{token}}","headers":{"Authorization":"Bearer x"}},"params":{"token":"s3cret"},
"secret_params":["token"],"executors":["w1"],"keepers":["admin"],"selector":"pool=billing"}`
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(a.must(201, "POST", "/api/v1/tasks", "/api/v1/tasks", task)), &created); err != nil {
		t.Fatal(err)
	}
	id := created.ID
	a.must(400, "POST", "/api/v1/tasks", "/api/v1/tasks", `{"title":"","type":"http"}`)
	a.must(200, "GET", "/api/v1/tasks", "/api/v1/tasks", "")
	a.must(200, "PUT", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", task)
	a.must(200, "POST", "/api/v1/tasks/"+id+"/start", "/api/v1/tasks/{id}/start", "")
	a.must(200, "PUT", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", task) // in place, while it runs
	// Versions: the creation and the two edits; an edit from version 1 is
	// refused now, If-Match or "version" alike.
	a.must(200, "GET", "/api/v1/tasks/"+id+"/versions", "/api/v1/tasks/{id}/versions", "")
	a.must(200, "GET", "/api/v1/tasks/"+id+"/versions/1", "/api/v1/tasks/{id}/versions/{n}", "")
	a.must(404, "GET", "/api/v1/tasks/"+id+"/versions/99", "/api/v1/tasks/{id}/versions/{n}", "")
	a.must(409, "PUT", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", strings.Replace(task, "{", `{"version":1,`, 1))
	a.must(200, "POST", "/api/v1/tasks/"+id+"/versions/1/restore", "/api/v1/tasks/{id}/versions/{n}/restore", `{"note":"back"}`)
	a.header = map[string]string{"If-Match": `"1"`}
	a.must(409, "PUT", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", task)
	a.header = map[string]string{"If-Match": "soon"}
	a.must(400, "PUT", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", task)
	a.header = nil
	a.must(200, "POST", "/api/v1/tasks/"+id+"/run", "/api/v1/tasks/{id}/run", "")
	a.must(200, "POST", "/api/v1/tasks/"+id+"/pause", "/api/v1/tasks/{id}/pause", "")
	a.must(200, "POST", "/api/v1/tasks/"+id+"/resume", "/api/v1/tasks/{id}/resume", "")
	// Runs as the worker reports them (its reports go to the master's
	// advertised address, which this test does not serve): one ended, one
	// in progress.
	now := time.Now().UTC().Truncate(time.Millisecond)
	code := 0
	runs := []store.Run{
		{ID: "run-ok", TaskID: id, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now.Add(time.Second), DurationMS: 1000,
			Result: store.ResultSuccess, Attempt: 1, HTTPStatus: 200, Output: "ok", Manual: true},
		{ID: "run-going", TaskID: id, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: store.ResultRunning,
			Attempt: 1, ExitCode: &code},
	}
	if _, err := store.InsertRuns(context.Background(), e.st.DB, runs); err != nil {
		t.Fatal(err)
	}
	runID := "run-ok"
	a.must(200, "GET", "/api/v1/tasks/"+id+"/runs", "/api/v1/tasks/{id}/runs", "")
	a.must(200, "GET", "/api/v1/runs/run-going", "/api/v1/runs/{id}", "")
	a.must(200, "GET", "/api/v1/runs/run-going/output", "/api/v1/runs/{id}/output", "")
	a.must(200, "GET", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", "")
	a.must(200, "GET", "/api/v1/runs", "/api/v1/runs", "")
	a.must(400, "GET", "/api/v1/runs?result=nope", "/api/v1/runs", "")
	a.must(200, "GET", "/api/v1/runs/"+runID, "/api/v1/runs/{id}", "")
	a.must(200, "GET", "/api/v1/runs/"+runID+"/output", "/api/v1/runs/{id}/output", "")
	a.must(409, "POST", "/api/v1/runs/"+runID+"/kill", "/api/v1/runs/{id}/kill", "")
	a.must(200, "POST", "/api/v1/tasks/"+id+"/stop", "/api/v1/tasks/{id}/stop", "")
	a.must(201, "POST", "/api/v1/tasks/"+id+"/clone", "/api/v1/tasks/{id}/clone", "")
	a.must(200, "POST", "/api/v1/tasks/bulk", "/api/v1/tasks/bulk", `{"action":"pause","ids":["`+id+`","ghost"]}`)
	a.must(200, "POST", "/api/v1/tasks/bulk", "/api/v1/tasks/bulk", `{"tasks":[`+task+`,{"title":""}],"start":true}`)
	a.must(404, "GET", "/api/v1/tasks/ghost", "/api/v1/tasks/{id}", "")

	// Workflows: one step on a target that holds its request until the
	// test ends, so the run is in progress when it is cancelled.
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hold) })
	if err := json.Unmarshal([]byte(a.must(201, "POST", "/api/v1/tasks", "/api/v1/tasks", `{"title":"slow step","type":"http",
"schedule":{"kind":"interval","every":"1h"},"http":{"url":"`+slow.URL+`/"},"executors":["w1"]}`)), &created); err != nil {
		t.Fatal(err)
	}
	taskID := created.ID
	wfBody := `{"title":"etl","steps":[{"name":"extract","task":"` + created.ID + `"},{"name":"notify","task":"` + created.ID +
		`","after":[{"step":"extract","on":"failure"}]}]}`
	if err := json.Unmarshal([]byte(a.must(201, "POST", "/api/v1/workflows", "/api/v1/workflows", wfBody)), &created); err != nil {
		t.Fatal(err)
	}
	wfID := created.ID
	a.must(400, "POST", "/api/v1/workflows", "/api/v1/workflows", `{"title":"loop","steps":[{"name":"a","task":"ghost","after":[{"step":"a"}]}]}`)
	a.must(200, "GET", "/api/v1/workflows", "/api/v1/workflows", "")
	a.must(200, "GET", "/api/v1/workflows?q=etl", "/api/v1/workflows", "")
	a.must(400, "GET", "/api/v1/workflows?q="+strings.Repeat("x", 201), "/api/v1/workflows", "")
	a.must(200, "GET", "/api/v1/workflows/"+wfID, "/api/v1/workflows/{id}", "")
	a.must(200, "PUT", "/api/v1/workflows/"+wfID, "/api/v1/workflows/{id}", wfBody)
	a.must(409, "PUT", "/api/v1/workflows/"+wfID, "/api/v1/workflows/{id}", strings.Replace(wfBody, "{", `{"version":1,`, 1))
	if err := json.Unmarshal([]byte(a.must(201, "POST", "/api/v1/workflows/"+wfID+"/run", "/api/v1/workflows/{id}/run", `{"params":{"day":"2026-11-28"}}`)), &created); err != nil {
		t.Fatal(err)
	}
	a.must(200, "GET", "/api/v1/workflows/"+wfID+"/runs", "/api/v1/workflows/{id}/runs", "")
	a.must(200, "GET", "/api/v1/workflow-runs/"+created.ID, "/api/v1/workflow-runs/{id}", "")
	a.must(200, "POST", "/api/v1/workflow-runs/"+created.ID+"/cancel", "/api/v1/workflow-runs/{id}/cancel", "")
	a.must(409, "POST", "/api/v1/workflow-runs/"+created.ID+"/cancel", "/api/v1/workflow-runs/{id}/cancel", "")
	rerun := a.must(201, "POST", "/api/v1/workflow-runs/"+created.ID+"/rerun", "/api/v1/workflow-runs/{id}/rerun", "")
	if err := json.Unmarshal([]byte(rerun), &created); err != nil {
		t.Fatal(err)
	}
	a.must(200, "POST", "/api/v1/workflow-runs/"+created.ID+"/cancel", "/api/v1/workflow-runs/{id}/cancel", "")
	a.must(404, "POST", "/api/v1/workflow-runs/ghost/rerun", "/api/v1/workflow-runs/{id}/rerun", "")
	a.must(404, "GET", "/api/v1/workflow-runs/ghost", "/api/v1/workflow-runs/{id}", "")
	a.must(200, "GET", "/api/v1/workflows/"+wfID+"/versions", "/api/v1/workflows/{id}/versions", "")
	a.must(200, "GET", "/api/v1/workflows/"+wfID+"/versions/2", "/api/v1/workflows/{id}/versions/{n}", "")
	a.must(404, "GET", "/api/v1/workflows/"+wfID+"/versions/99", "/api/v1/workflows/{id}/versions/{n}", "")
	a.must(200, "POST", "/api/v1/workflows/"+wfID+"/versions/1/restore", "/api/v1/workflows/{id}/versions/{n}/restore", `{"note":"back"}`)
	a.must(404, "POST", "/api/v1/workflows/"+wfID+"/versions/99/restore", "/api/v1/workflows/{id}/versions/{n}/restore", "")
	a.must(200, "POST", "/api/v1/workflows/"+wfID+"/pause", "/api/v1/workflows/{id}/pause", "")
	a.must(409, "POST", "/api/v1/workflows/"+wfID+"/pause", "/api/v1/workflows/{id}/pause", "")
	a.must(200, "POST", "/api/v1/workflows/"+wfID+"/resume", "/api/v1/workflows/{id}/resume", "")
	hours := time.Now().UTC().Truncate(time.Hour)
	window := fmt.Sprintf(`{"from":%q,"to":%q}`, hours.Add(-2*time.Hour).Format(time.RFC3339), hours.Format(time.RFC3339))
	a.must(400, "POST", "/api/v1/workflows/"+wfID+"/backfills", "/api/v1/workflows/{id}/backfills", window) // no schedule
	a.must(200, "GET", "/api/v1/workflows/"+wfID+"/backfills", "/api/v1/workflows/{id}/backfills", "")
	var bf struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(a.must(201, "POST", "/api/v1/tasks/"+taskID+"/backfills", "/api/v1/tasks/{id}/backfills", window)), &bf); err != nil {
		t.Fatal(err)
	}
	a.must(400, "POST", "/api/v1/tasks/"+taskID+"/backfills", "/api/v1/tasks/{id}/backfills", `{"from":"2026-01-01T00:00:00Z"}`)
	a.must(200, "GET", "/api/v1/tasks/"+taskID+"/backfills", "/api/v1/tasks/{id}/backfills", "")
	a.must(200, "GET", "/api/v1/backfills/"+bf.ID, "/api/v1/backfills/{id}", "")
	a.must(404, "GET", "/api/v1/backfills/ghost", "/api/v1/backfills/{id}", "")
	a.must(200, "POST", "/api/v1/backfills/"+bf.ID+"/pause", "/api/v1/backfills/{id}/pause", "")
	a.must(200, "POST", "/api/v1/backfills/"+bf.ID+"/resume", "/api/v1/backfills/{id}/resume", "")
	a.must(409, "POST", "/api/v1/backfills/"+bf.ID+"/resume", "/api/v1/backfills/{id}/resume", "")
	a.must(200, "POST", "/api/v1/backfills/"+bf.ID+"/cancel", "/api/v1/backfills/{id}/cancel", "")
	a.must(409, "POST", "/api/v1/backfills/"+bf.ID+"/cancel", "/api/v1/backfills/{id}/cancel", "")
	var conn struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(a.must(201, "POST", "/api/v1/connections", "/api/v1/connections",
		`{"name":"events","kind":"nats","address":"127.0.0.1:4222","secret":"s3cret-value"}`)), &conn); err != nil {
		t.Fatal(err)
	}
	a.must(400, "POST", "/api/v1/connections", "/api/v1/connections", `{"name":"bad name","kind":"nats","address":"x"}`)
	a.must(200, "GET", "/api/v1/connections", "/api/v1/connections", "")
	a.must(200, "GET", "/api/v1/connections/"+conn.ID, "/api/v1/connections/{id}", "")
	a.must(404, "GET", "/api/v1/connections/ghost", "/api/v1/connections/{id}", "")
	a.must(200, "PUT", "/api/v1/connections/"+conn.ID, "/api/v1/connections/{id}", `{"name":"events","kind":"nats","address":"127.0.0.1:4223","secret":"********"}`)
	a.must(409, "PUT", "/api/v1/connections/"+conn.ID, "/api/v1/connections/{id}", `{"name":"events","kind":"nats","address":"127.0.0.1:4223","version":1}`)
	a.must(400, "POST", "/api/v1/connections/"+conn.ID+"/test", "/api/v1/connections/{id}/test", `{"node":"ghost"}`)
	a.must(204, "DELETE", "/api/v1/connections/"+conn.ID, "/api/v1/connections/{id}", "")
	a.must(204, "DELETE", "/api/v1/workflows/"+wfID, "/api/v1/workflows/{id}", "")
	a.must(404, "GET", "/api/v1/workflows/"+wfID, "/api/v1/workflows/{id}", "")

	// Configuration as code.
	doc := a.must(200, "GET", "/api/v1/export", "/api/v1/export", "")
	if !strings.Contains(doc, "${ENV:PING_PARAM_TOKEN}") {
		t.Fatalf("export:\n%s", doc)
	}
	a.ct = "application/yaml"
	a.must(200, "POST", "/api/v1/apply?dry_run=true", "/api/v1/apply",
		regexp.MustCompile(`\$\{ENV:[A-Z_]+\}`).ReplaceAllString(doc, "filled-secret"))
	a.must(400, "POST", "/api/v1/apply", "/api/v1/apply", doc) // the references are not filled
	a.ct = ""
	a.must(200, "POST", "/api/v1/apply", "/api/v1/apply", `{"version":1,"dry_run":true,"tasks":[]}`)
	withSettings := a.must(200, "GET", "/api/v1/export?settings=true", "/api/v1/export", "")
	if !strings.Contains(withSettings, "\nsettings:\n") || !strings.Contains(withSettings, "run_retention_days:") {
		t.Fatalf("export with settings:\n%s", withSettings)
	}
	a.must(400, "GET", "/api/v1/export?settings=maybe", "/api/v1/export", "")
	plan := a.must(200, "POST", "/api/v1/apply", "/api/v1/apply", `{"version":1,"dry_run":true,"settings":{"run_retention_days":21},"tasks":[]}`)
	if !strings.Contains(plan, `"settings":{"fields":["run_retention_days"]`) {
		t.Fatalf("plan of a settings change: %s", plan)
	}

	// Users and tokens.
	a.must(200, "GET", "/api/v1/users", "/api/v1/users", "")
	a.must(201, "POST", "/api/v1/users", "/api/v1/users", `{"username":"carol","password":"a long passphrase 1","role":"viewer","email":"carol@example.com"}`)
	a.must(200, "GET", "/api/v1/users/carol", "/api/v1/users/{username}", "")
	a.must(200, "PATCH", "/api/v1/users/carol", "/api/v1/users/{username}", `{"disabled":true}`)
	tok := a.must(201, "POST", "/api/v1/tokens", "/api/v1/tokens", `{"name":"deploy","expires_at":"2030-01-31T18:00:00Z"}`)
	var tk struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal([]byte(tok), &tk)
	a.must(200, "GET", "/api/v1/tokens", "/api/v1/tokens", "")
	a.must(200, "DELETE", fmt.Sprintf("/api/v1/tokens/%d", tk.ID), "/api/v1/tokens/{id}", "")
	a.must(409, "DELETE", fmt.Sprintf("/api/v1/tokens/%d", tk.ID), "/api/v1/tokens/{id}", "")

	// Delayed tasks.
	del := a.must(201, "POST", "/api/v1/delayed", "/api/v1/delayed", `{"source_app":"shop","topic":"remind","content_key":"o-42","delay":"1h",
"notify_url":"`+target.URL+`/hook","notify_body":"{}","content_type":"application/json","executors":["w1"]}`)
	var d struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(del), &d)
	a.must(200, "POST", "/api/v1/delayed/batch", "/api/v1/delayed/batch", `{"tasks":[{"source_app":"shop","topic":"remind","content_key":"o-43","delay":"1h",
"notify_url":"`+target.URL+`/hook","executors":["w1"]},{"source_app":""}]}`)
	a.must(200, "GET", "/api/v1/delayed", "/api/v1/delayed", "")
	a.must(200, "GET", "/api/v1/delayed/"+d.ID, "/api/v1/delayed/{id}", "")
	a.must(200, "POST", "/api/v1/delayed/"+d.ID+"/cancel", "/api/v1/delayed/{id}/cancel", "")
	a.must(409, "DELETE", "/api/v1/delayed/"+d.ID, "/api/v1/delayed/{id}", "")

	a.must(200, "GET", "/api/v1/events", "/api/v1/events", "")
	a.must(200, "GET", "/api/v1/settings", "/api/v1/settings", "")
	a.must(200, "PATCH", "/api/v1/settings", "/api/v1/settings", `{"run_retention_days":14,"prune_offline_after":"7d"}`)
	a.must(400, "PATCH", "/api/v1/settings", "/api/v1/settings", `{"health_interval":"soon"}`)
	a.must(204, "DELETE", "/api/v1/tasks/"+id, "/api/v1/tasks/{id}", "")
	a.must(200, "POST", "/api/v1/nodes/w1/disable", "/api/v1/nodes/{name}/disable", "")
	a.must(200, "POST", "/api/v1/nodes/w1/reset-identity", "/api/v1/nodes/{name}/reset-identity", "")
	a.must(204, "DELETE", "/api/v1/nodes/w1", "/api/v1/nodes/{name}", "")

	// The cluster API refuses a caller without the node's secret, as documented.
	anon := &apiCall{e: e, o: o, c: e.client()}
	anon.must(401, "POST", "/api/worker/offline", "/api/worker/offline", "{}")
	anon.must(401, "GET", "/api/v1/tasks", "/api/v1/tasks", "")
	// A viewer may read but not write.
	e.addUser("viewer", "viewer-password-1", "viewer")
	viewer := &apiCall{e: e, o: o, c: e.login("viewer", "viewer-password-1")}
	viewer.must(403, "POST", "/api/v1/apply", "/api/v1/apply", `{"version":1,"tasks":[]}`)
	viewer.must(200, "GET", "/api/v1/export", "/api/v1/export", "")
	viewer.must(403, "GET", "/api/v1/export?settings=true", "/api/v1/export", "")

	// The schemas refuse what the answers must not be.
	if err := o.compile(o.responseSchema("GET", "/api/v1/runs", 200, "application/json")).Validate(map[string]any{"items": "x", "total": 1}); err == nil {
		t.Error("the runs list schema accepts items that are not a list")
	}
	if err := o.compile(o.responseSchema("GET", "/api/v1/runs/{id}", 200, "application/json")).Validate(map[string]any{"id": "r"}); err == nil {
		t.Error("the run schema accepts a run without its fields")
	}

	var missing []string
	for _, op := range []string{"GET /api/v1/nodes", "POST /api/v1/nodes", "GET /api/v1/tasks", "POST /api/v1/tasks",
		"GET /api/v1/runs", "GET /api/v1/delayed", "POST /api/v1/delayed", "GET /api/v1/events", "GET /api/v1/users",
		"POST /api/v1/users", "GET /api/v1/tokens", "POST /api/v1/tokens", "GET /api/v1/pools", "GET /api/v1/export",
		"POST /api/v1/apply"} {
		if !o.seen[op] {
			missing = append(missing, op)
		}
	}
	if len(missing) > 0 {
		t.Errorf("answers not validated: %v", missing)
	}
	t.Logf("%d operations validated against the document", len(o.seen))
	if n := len(o.seen); n < 40 {
		seen := make([]string, 0, n)
		for k := range o.seen {
			seen = append(seen, k)
		}
		slices.Sort(seen)
		t.Errorf("only %d operations validated: %v", n, seen)
	}
}
