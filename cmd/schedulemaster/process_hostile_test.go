package main

// Hostile-input replay (issue 8): every case class of the issue, driven against
// real master and worker processes on loopback. One master with its workers is
// shared by the cases that do not interfere; the cases that poison shared state
// (the login throttle, peak RSS, file modes, server timeouts) get their own.

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// hostileTarget is an HTTP endpoint that answers odd bodies and remembers the
// headers it received, per path.
type hostileTarget struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	headers map[string][]http.Header
}

// pngHeader is the start of a PNG file: a NUL-laden binary answer.
const pngHeader = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"

func newHostileTarget(t *testing.T) *hostileTarget {
	tg := &hostileTarget{hits: map[string]int{}, headers: map[string][]http.Header{}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		tg.hits[r.URL.Path]++
		tg.headers[r.URL.Path] = append(tg.headers[r.URL.Path], r.Header.Clone())
		tg.mu.Unlock()
		switch r.URL.Path {
		case "/nul":
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, "before\x00after\x00\x00end")
		case "/badutf8":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "bad \xff\xfe bytes \xc3\x28 here")
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			io.WriteString(w, pngHeader)
		case "/big":
			// 100 KiB, more than a run keeps: odd bytes and 3-byte
			// characters everywhere, so the cut lands inside one.
			w.Header().Set("Content-Type", "application/octet-stream")
			io.WriteString(w, strings.Repeat("€\xff\x00ab", 100<<10/7)+"THE END")
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *hostileTarget) count(path string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.hits[path]
}

func (tg *hostileTarget) lastHeader(path string) http.Header {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	h := tg.headers[path]
	if len(h) == 0 {
		return nil
	}
	return h[len(h)-1]
}

// hostileRun is a run as the API shows it, with the binary flag.
type hostileRun struct {
	ID           string    `json:"id"`
	TaskID       string    `json:"task_id"`
	Node         string    `json:"node"`
	StartedAt    time.Time `json:"started_at"`
	Result       string    `json:"result"`
	HTTPStatus   int       `json:"http_status"`
	Output       string    `json:"output"`
	BinaryOutput bool      `json:"binary_output"`
}

// hostileRuns lists every run of a task (newest first) and the raw JSON.
func (m *masterProc) hostileRuns(id string) ([]hostileRun, string) {
	m.t.Helper()
	status, body := m.api("GET", "/api/v1/tasks/"+id+"/runs?limit=500", "")
	if status != 200 {
		m.t.Fatalf("runs of %s: %d %s", id, status, body)
	}
	var page struct {
		Items []hostileRun `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		m.t.Fatalf("runs of %s: %v in %s", id, err, body)
	}
	return page.Items, body
}

// waitFor polls cond every 100ms until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noRedirectClient does not follow redirects, with its own cookie jar.
func noRedirectClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends one request and returns status, body and headers; a transport
// error fails the test.
func do(t *testing.T, c *http.Client, req *http.Request) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// fakeNodeHost serves /health for a node that exists only in this test, so
// the master's health checks find it alive; every other call answers {}.
func fakeNodeHost(t *testing.T, name, bootID string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == protocol.PathHealth {
			_ = json.NewEncoder(w).Encode(protocol.HealthResponse{Node: name, BootID: bootID, Status: protocol.StateScheduling})
			return
		}
		io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// registration is one hand-made POST /api/worker/register.
type registration struct {
	name, host, secret, bootID string
	clusterKey                 string             // default testClusterKey
	announce                   string             // hex public key in the body; default: signer's
	signer                     ed25519.PrivateKey // signs sm_node_signature; nil: no signature header
	noKey                      bool               // leave node_key out
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func pubHex(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }

// register posts the registration with the cluster-key MAC and, when it has a
// signer, the node-key signature, and returns the status and body.
func (m *masterProc) register(r registration) (int, string) {
	m.t.Helper()
	if r.clusterKey == "" {
		r.clusterKey = testClusterKey
	}
	if r.secret == "" {
		r.secret = protocol.NewSecret()
	}
	if r.bootID == "" {
		r.bootID = protocol.NewNonce()
	}
	req := protocol.RegisterRequest{
		Node:        protocol.NodeConfig{Name: r.name, Protocol: "http", Host: r.host, Priority: 1, MaxConcurrency: 10},
		MachineName: "hostile-test", Secret: r.secret, BootID: r.bootID,
	}
	switch {
	case r.noKey:
	case r.announce != "":
		req.NodeKey = r.announce
	case r.signer != nil:
		req.NodeKey = pubHex(r.signer)
	}
	body, _ := json.Marshal(req)
	ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), protocol.NewNonce()
	hr, _ := http.NewRequest("POST", m.URL+protocol.PathMasterRegister, bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(protocol.HeaderNode, r.name)
	hr.Header.Set(protocol.HeaderTimestamp, ts)
	hr.Header.Set(protocol.HeaderNonce, nonce)
	hr.Header.Set(protocol.HeaderSignature, protocol.RegisterMAC(r.clusterKey, r.name, ts, nonce, body))
	if r.signer != nil {
		hr.Header.Set(protocol.HeaderNodeSignature, protocol.SignRegistration(r.signer, r.name, ts, nonce, body))
	}
	status, resp, _ := do(m.t, http.DefaultClient, hr)
	return status, resp
}

// fakeNode is a node registered by the test itself: it holds the node's
// secret, so it can call the worker-to-master API as that node.
type fakeNode struct {
	name, secret, host string
	key                ed25519.PrivateKey
}

func registerFake(t *testing.T, m *masterProc, name string) *fakeNode {
	t.Helper()
	boot := protocol.NewNonce()
	f := &fakeNode{name: name, secret: protocol.NewSecret(), host: fakeNodeHost(t, name, boot), key: newKey(t)}
	if status, body := m.register(registration{name: name, host: f.host, secret: f.secret, bootID: boot, signer: f.key}); status != 200 {
		t.Fatalf("register fake node %s: %d %s", name, status, body)
	}
	return f
}

// call posts body to a worker-to-master path with this node's credentials.
func (f *fakeNode) call(t *testing.T, m *masterProc, path, secret string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", m.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(protocol.HeaderNode, f.name)
	req.Header.Set(protocol.HeaderSecret, secret)
	status, resp, _ := do(t, http.DefaultClient, req)
	return status, resp
}

// report sends one batch and decodes the per-run answer.
func (f *fakeNode) report(t *testing.T, m *masterProc, runs ...protocol.RunReport) protocol.RunsResponse {
	t.Helper()
	body, _ := json.Marshal(protocol.RunsRequest{Runs: runs})
	status, resp := f.call(t, m, protocol.PathMasterRuns, f.secret, body)
	if status != 200 {
		t.Fatalf("run batch of %s: %d %s, want 200 with a per-run answer", f.name, status, resp)
	}
	var rr protocol.RunsResponse
	if err := json.Unmarshal([]byte(resp), &rr); err != nil {
		t.Fatalf("run batch answer %s: %v", resp, err)
	}
	return rr
}

func rejected(rr protocol.RunsResponse, id string) bool {
	for _, r := range rr.Rejected {
		if r.ID == id {
			return true
		}
	}
	return false
}

// hostileFleet is the master, two auto workers, a manual worker (admin-created
// node, not connected) and a target shared by the cases of TestHostileInput.
type hostileFleet struct {
	m              *masterProc
	tg             *hostileTarget
	w1Host, w2Host string
	manHost        string
	fake           *fakeNode
}

func startHostileFleet(t *testing.T) *hostileFleet {
	t.Helper()
	f := &hostileFleet{m: startMaster(t, ""), tg: newHostileTarget(t)}
	_, f.w1Host = startWorker(t, f.m, "hw1")
	_, f.w2Host = startWorker(t, f.m, "hw2")
	_, f.manHost = startWorker(t, f.m, "hman", "--autor=false", "--workerof", "master")
	for _, n := range []string{"hw1", "hw2"} {
		f.m.waitNode(n, 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}
	if status, body := f.m.api("POST", "/api/v1/nodes", `{"name":"hman","host":"`+f.manHost+`"}`); status != http.StatusCreated {
		t.Fatalf("create manual node: %d %s", status, body)
	}
	f.fake = registerFake(t, f.m, "hfake")
	return f
}

// task creates a task from a JSON body.
func (f *hostileFleet) task(t *testing.T, body string) taskJSON {
	t.Helper()
	return f.m.createTask(body)
}

// httpTask is the JSON of an http task calling path on the target.
func (f *hostileFleet) httpTask(title, every, path, executors, extra string) string {
	return fmt.Sprintf(`{"title":%q,"type":"http","schedule":{"kind":"interval","every":%q},
		"http":{"method":"GET","url":%q},"timeout":"5s","executors":%s%s}`, title, every, f.tg.URL+path, executors, extra)
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	f := startHostileFleet(t)
	t.Run("01_binary_output_never_blocks_runs", f.binaryOutput)
	t.Run("02_nul_and_invalid_utf8_inputs", f.badTextInputs)
	t.Run("08_forged_run_reports_and_claims", f.forgedReports)
	t.Run("09_node_identity", f.nodeIdentity)
	t.Run("10_logout_ends_session", f.logoutReplay)
	t.Run("11_login_next_same_site", f.loginNext)
	t.Run("12_secrets_masked", f.maskedSecrets)
	t.Run("13_connect_reveals_no_master_name", f.connectProbe)
	t.Run("15_schedules_that_cannot_work", f.badSchedules)
}

// Case 1: binary answers are stored sanitized and flagged; the worker's other
// runs keep being recorded. Bogus credentials and non-JSON batches are refused.
func (f *hostileFleet) binaryOutput(t *testing.T) {
	m := f.m
	paths := []string{"/nul", "/badutf8", "/png", "/big"}
	ids := map[string]string{}
	for _, p := range append([]string{"/ok"}, paths...) {
		tk := f.task(t, f.httpTask("bin "+p, "1s", p, `["hw1"]`, ""))
		ids[p] = tk.ID
		m.taskAction(tk.ID, "start")
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			for _, id := range ids {
				m.api("POST", "/api/v1/tasks/"+id+"/stop", "")
			}
		}
	}
	defer stop()
	waitFor(t, 40*time.Second, "two recorded runs of every binary task", func() bool {
		for _, p := range paths {
			if r, _ := m.hostileRuns(ids[p]); len(r) < 2 {
				return false
			}
		}
		return true
	})
	// The worker is not stuck: runs of the plain task made after the binary
	// ones keep arriving.
	okRuns, _ := m.hostileRuns(ids["/ok"])
	n0 := len(okRuns)
	waitFor(t, 20*time.Second, "later runs of the plain task recorded", func() bool {
		r, _ := m.hostileRuns(ids["/ok"])
		return len(r) >= n0+3
	})
	stop()
	// Every hit of the target is a recorded run, for every task.
	waitFor(t, 30*time.Second, "runs and target hits agree for every task", func() bool {
		for p, id := range ids {
			if r, _ := m.hostileRuns(id); len(r) != f.tg.count(p) {
				return false
			}
		}
		return true
	})
	for _, p := range paths {
		runs, raw := m.hostileRuns(ids[p])
		if strings.Contains(raw, `\u0000`) {
			t.Errorf("%s: the API shows a NUL in the output: %s", p, raw)
		}
		for _, r := range runs {
			if r.Result != "success" || !r.BinaryOutput || !strings.ContainsRune(r.Output, utf8.RuneError) || !utf8.ValidString(r.Output) {
				t.Errorf("%s run %s: result %s binary_output %v output %q; want success, binary_output true, U+FFFD shown", p, r.ID, r.Result, r.BinaryOutput, r.Output)
			}
		}
		if p == "/big" {
			// Item 17: the kept tail starts with a notice saying what was
			// cut, is bounded, and no character is split. Lists carry a
			// preview of it; the run itself has it all.
			for _, r := range runs {
				status, body := m.api("GET", "/api/v1/runs/"+r.ID, "")
				if err := json.Unmarshal([]byte(body), &r); status != 200 || err != nil {
					t.Fatalf("run %s: %d %v", r.ID, status, err)
				}
				if !strings.HasPrefix(r.Output, "[… ") || !strings.Contains(r.Output, "earlier bytes truncated]") ||
					!strings.HasSuffix(r.Output, "THE END") || len(r.Output) > protocol.MaxOutputBytes+100 {
					t.Errorf("long output of run %s: %d bytes, starts %q, ends %q; want a truncation notice, the end kept, at most %d bytes",
						r.ID, len(r.Output), r.Output[:min(60, len(r.Output))], r.Output[max(0, len(r.Output)-20):], protocol.MaxOutputBytes+100)
				}
			}
		}
		if len(runs) > 0 {
			if status, page := m.api("GET", "/runs/"+runs[0].ID, ""); status != 200 || strings.Contains(page, "\x00") || !utf8.ValidString(page) {
				t.Errorf("%s: run page %d, NUL or invalid UTF-8 in it: %v", p, status, status == 200)
			}
		}
	}
	okRuns, _ = m.hostileRuns(ids["/ok"])
	for _, r := range okRuns {
		if r.Result != "success" || r.BinaryOutput || r.Output != "ok" {
			t.Errorf("plain run %s: %s binary %v %q", r.ID, r.Result, r.BinaryOutput, r.Output)
		}
	}

	// A batch with a wrong node secret is refused as a whole.
	good := protocol.RunReport{ID: "bogus-secret-run", TaskID: ids["/ok"], Node: "hw1", ScheduledAt: time.Now(), StartedAt: time.Now(),
		EndedAt: time.Now(), Result: protocol.ResultSuccess, Attempt: 1, Output: "forged"}
	body, _ := json.Marshal(protocol.RunsRequest{Runs: []protocol.RunReport{good}})
	hw1 := &fakeNode{name: "hw1"}
	if status, resp := hw1.call(t, m, protocol.PathMasterRuns, protocol.NewSecret(), body); status != http.StatusUnauthorized {
		t.Errorf("run batch with a bogus secret: %d %s, want 401", status, resp)
	}
	// A batch that is not JSON is a 400 for the whole batch.
	if status, resp := f.fake.call(t, m, protocol.PathMasterRuns, f.fake.secret, []byte("\x00\xffnot json{")); status != http.StatusBadRequest {
		t.Errorf("non-JSON run batch: %d %s, want 400", status, resp)
	}
	if status, _ := m.api("GET", "/api/v1/runs/bogus-secret-run", ""); status != http.StatusNotFound {
		t.Errorf("the run sent with a bogus secret is stored: GET answers %d", status)
	}
}

// snapshot is what hostile inputs must not change: task count, node names, users.
func (f *hostileFleet) snapshot(t *testing.T) string {
	t.Helper()
	var parts []string
	st, body := f.m.api("GET", "/api/v1/tasks?limit=500", "")
	var tasks struct {
		Total int `json:"total"`
	}
	_ = json.Unmarshal([]byte(body), &tasks)
	parts = append(parts, fmt.Sprintf("tasks %d %d", st, tasks.Total))
	st, body = f.m.api("GET", "/api/v1/nodes", "")
	var nodes []nodeJSON
	_ = json.Unmarshal([]byte(body), &nodes)
	for _, n := range nodes {
		parts = append(parts, "node "+n.Name+" "+n.Host+" "+n.Mode)
	}
	st, body = f.m.api("GET", "/api/v1/users", "")
	parts = append(parts, fmt.Sprintf("users %d %s", st, body))
	return strings.Join(parts, "\n")
}

// Case 2: NUL and invalid UTF-8 in every kind of text input are a 400 naming
// the field, never a 500, and change nothing.
func (f *hostileFleet) badTextInputs(t *testing.T) {
	m := f.m
	before := f.snapshot(t)
	check := func(what string, status int, body, field string) {
		t.Helper()
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d %.300s, want 400", what, status, body)
			return
		}
		if field != "" && !strings.Contains(body, field) {
			t.Errorf("%s: 400 without naming the field %q: %.300s", what, field, body)
		}
	}
	for _, bad := range []struct{ name, raw, esc string }{
		{"NUL", "ad\x00min", "ad%00min"},
		{"invalid UTF-8", "ad\xffmin", "ad%FFmin"},
	} {
		// Login name (form, unauthenticated).
		req, _ := http.NewRequest("POST", m.URL+"/login", strings.NewReader(url.Values{"username": {bad.raw}, "password": {"x"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		status, body, _ := do(t, noRedirectClient(), req)
		check("login name with "+bad.name, status, body, "")

		// Query filters, API and console.
		for _, p := range []string{"/api/v1/tasks?title=" + bad.esc, "/api/v1/tasks?node=" + bad.esc, "/api/v1/events?actor=" + bad.esc,
			"/tasks?title=" + bad.esc, "/events?actor=" + bad.esc} {
			status, body := m.api("GET", p, "")
			field := ""
			if strings.HasPrefix(p, "/api/") {
				field = p[strings.Index(p, "?")+1 : strings.Index(p, "=")]
			}
			check("query "+p, status, body, field)
		}
		// Path parameters.
		for _, p := range []string{"/api/v1/nodes/" + bad.esc, "/api/v1/tasks/" + bad.esc, "/api/v1/runs/" + bad.esc,
			"/api/v1/users/" + bad.esc, "/tasks/" + bad.esc, "/nodes/" + bad.esc + "/edit"} {
			status, body := m.api("GET", p, "")
			check("path "+p, status, body, "")
		}
		status, body = m.api("POST", "/api/v1/nodes/"+bad.esc+"/connect", "")
		check("path of connect", status, body, "")

		// Task title in the JSON API: as a \u0000 escape, and as raw bytes.
		jsonTitle := `"bad\u0000title"`
		if bad.name != "NUL" {
			jsonTitle = "\"bad\xfftitle\""
		}
		status, body = m.api("POST", "/api/v1/tasks", `{"title":`+jsonTitle+`,"type":"http","schedule":{"kind":"interval","every":"1h"},
			"http":{"url":"`+f.tg.URL+`/ok"},"executors":["hw1"]}`)
		check("task title with "+bad.name, status, body, "title")

		// Node name: API and console form.
		status, body = m.api("POST", "/api/v1/nodes", `{"name":"`+strings.ReplaceAll(jsonTitle[1:len(jsonTitle)-1], "title", "node")+`","host":"127.0.0.1:1"}`)
		check("node name with "+bad.name, status, body, "name")
		resp, err := m.client.PostForm(m.URL+"/nodes", url.Values{"name": {"n" + bad.raw}, "host": {"127.0.0.1:1"}, "protocol": {"http"},
			"priority": {"1"}, "max_concurrency": {"10"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		check("console node form name with "+bad.name, resp.StatusCode, string(b), "")

		// Settings form: one bad field, one good change that must not be saved.
		form := url.Values{"health_interval": {"10s"}, "health_timeout": {"3s"}, "max_failures": {"3"}, "default_http_timeout": {"30s"},
			"run_retention_days": {"30"}, "smtp_port": {"587"}, "smtp_from": {"ops" + bad.raw + "@example.com"},
			"webhook_url": {"http://hostile-changed.example/hook"}}
		resp, err = m.client.PostForm(m.URL+"/settings", form)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		check("settings form with "+bad.name, resp.StatusCode, string(b), "")
		if _, page := m.api("GET", "/settings", ""); strings.Contains(page, "hostile-changed") {
			t.Errorf("settings form with %s in smtp_from saved the other fields", bad.name)
		}
	}
	if after := f.snapshot(t); after != before {
		t.Errorf("bad inputs changed something:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !strings.Contains(m.node("hw1").Name, "hw1") {
		t.Error("the master lost its nodes")
	}
}

// Case 8: a node with a valid secret may report and claim only for tasks it
// executes, under its own name, with sane times.
func (f *hostileFleet) forgedReports(t *testing.T) {
	m, fake := f.m, f.fake
	child := f.task(t, f.httpTask("forged child", "1h", "/child", `["hw2"]`, ""))
	other := f.task(t, f.httpTask("not the fake's", "1h", "/other", `["hw1"]`, `,"children":["`+child.ID+`"]`))
	own := f.task(t, f.httpTask("the fake's own", "1h", "/own", `["hfake"]`, `,"children":["`+child.ID+`"]`))

	now := time.Now().UTC()
	run := func(id, task, node string, start time.Time) protocol.RunReport {
		return protocol.RunReport{ID: id, TaskID: task, Node: node, ScheduledAt: start.Truncate(time.Second), StartedAt: start,
			EndedAt: start.Add(10 * time.Millisecond), DurationMS: 10, Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, Output: "forged"}
	}
	forged := []protocol.RunReport{
		run("forged-not-executor", other.ID, "hfake", now),
		run("forged-no-such-task", "no-such-task-0123456789", "hfake", now),
		run("forged-other-name", own.ID, "hw1", now),
		run("forged-future", own.ID, "hfake", now.Add(time.Hour)),
	}
	rr := fake.report(t, m, forged...)
	for _, r := range forged {
		if !rejected(rr, r.ID) {
			t.Errorf("forged run %s not in rejected: %+v", r.ID, rr)
		}
		if status, body := m.api("GET", "/api/v1/runs/"+r.ID, ""); status != http.StatusNotFound {
			t.Errorf("forged run %s is stored: %d %.200s", r.ID, status, body)
		}
	}
	if rr.Accepted != 0 {
		t.Errorf("forged batch: %d accepted, want 0", rr.Accepted)
	}
	// The same batch holding one honest run: the honest one is stored.
	rr = fake.report(t, m, run("forged-again-other", other.ID, "hfake", now), run("honest-own", own.ID, "hfake", now))
	if rr.Accepted != 1 || !rejected(rr, "forged-again-other") || rejected(rr, "honest-own") {
		t.Errorf("mixed batch: %+v, want the honest run accepted and the forged one rejected", rr)
	}
	if status, body := m.api("GET", "/api/v1/runs/honest-own", ""); status != 200 {
		t.Errorf("honest run not stored: %d %s", status, body)
	}
	// The honest success starts the child once; the forged ones start nothing.
	waitFor(t, 20*time.Second, "the child run of the honest report", func() bool { return f.tg.count("/child") >= 1 })
	quiet := time.Now().Add(2 * time.Second)
	for time.Now().Before(quiet) {
		if n := f.tg.count("/child"); n != 1 {
			t.Fatalf("child task ran %d times; forged reports started child runs", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if runs, _ := m.hostileRuns(other.ID); len(runs) != 0 {
		t.Errorf("task %s has %d runs, want none (only forged reports)", other.ID, len(runs))
	}
	// The future time did not freeze the task's last run.
	_, body := m.api("GET", "/api/v1/tasks/"+own.ID, "")
	var got struct {
		LastRunAt *time.Time `json:"last_run_at"`
	}
	_ = json.Unmarshal([]byte(body), &got)
	if got.LastRunAt != nil && got.LastRunAt.After(time.Now().Add(protocol.MaxClockSkew)) {
		t.Errorf("last_run_at %s is in the future", got.LastRunAt)
	}
	// Claims: only for tasks the node executes.
	claim := func(task string) (int, string) {
		b, _ := json.Marshal(protocol.ClaimRequest{TaskID: task, FireAt: time.Now().Truncate(time.Second)})
		return fake.call(t, m, protocol.PathMasterClaim, fake.secret, b)
	}
	if status, body := claim(other.ID); status != http.StatusForbidden {
		t.Errorf("claim of a task the node does not execute: %d %s, want 403", status, body)
	}
	if status, body := claim("no-such-task-0123456789"); status != http.StatusForbidden && status != http.StatusNotFound {
		t.Errorf("claim of a task that does not exist: %d %s, want 403 or 404", status, body)
	}
	if status, body := claim(own.ID); status == http.StatusForbidden || status >= 500 {
		t.Errorf("claim of its own task: %d %s", status, body)
	}
}

// Case 9: the cluster key lets a new machine join under a new name, never take
// over another's.
func (f *hostileFleet) nodeIdentity(t *testing.T) {
	m := f.m
	victim, victimHost := startWorker(t, m, "hvictim")
	m.waitNode("hvictim", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	rowOf := func(name string) string {
		n := m.node(name)
		if n == nil {
			return "<none>"
		}
		return n.Host + " " + n.Mode + " " + n.Type
	}
	thief := newKey(t)
	thiefHost := fakeNodeHost(t, "thief", "boot")

	// An existing auto worker's name with another key.
	status, body := m.register(registration{name: "hvictim", host: thiefHost, signer: thief})
	if status != http.StatusConflict || !strings.Contains(body, "hvictim") {
		t.Errorf("take over auto node hvictim: %d %s, want 409 naming the node", status, body)
	}
	if got := rowOf("hvictim"); got != victimHost+" auto worker" {
		t.Errorf("hvictim row after a refused take-over: %s", got)
	}
	// The admin-created manual node.
	manBefore := rowOf("hman")
	if status, body := m.register(registration{name: "hman", host: thiefHost, signer: thief}); status != http.StatusConflict {
		t.Errorf("take over manual node hman: %d %s, want 409", status, body)
	}
	if got := rowOf("hman"); got != manBefore || !strings.Contains(got, "manual") {
		t.Errorf("hman row after a refused take-over: %s, was %s", got, manBefore)
	}
	// The master's name in another case, and a worker's name in another case.
	for _, name := range []string{"MASTER", "Master", "HVICTIM", "Hw1"} {
		status, body := m.register(registration{name: name, host: thiefHost, signer: newKey(t)})
		if status != http.StatusConflict && status != http.StatusBadRequest {
			t.Errorf("register %s: %d %s, want 409 or 400", name, status, body)
		}
		if m.node(name) != nil {
			t.Errorf("node %s exists beside its lower-case namesake", name)
		}
	}
	// No node key, or a signature by another key than the one announced.
	if status, body := m.register(registration{name: "hnokey", host: thiefHost, noKey: true}); status != http.StatusBadRequest && status != http.StatusUnauthorized {
		t.Errorf("register without node_key: %d %s, want 400/401", status, body)
	}
	if status, body := m.register(registration{name: "hbadsig", host: thiefHost, announce: pubHex(newKey(t)), signer: thief}); status != http.StatusBadRequest && status != http.StatusUnauthorized {
		t.Errorf("register with a signature by another key: %d %s, want 400/401", status, body)
	}
	if status, body := m.register(registration{name: "hnosig", host: thiefHost, announce: pubHex(thief)}); status != http.StatusBadRequest && status != http.StatusUnauthorized {
		t.Errorf("register without sm_node_signature: %d %s, want 400/401", status, body)
	}
	for _, n := range []string{"hnokey", "hbadsig", "hnosig"} {
		if m.node(n) != nil {
			t.Errorf("refused registration created node %s", n)
		}
	}

	// The machine is replaced: after Reset identity the new key registers, and
	// the name is then bound to it.
	victim.kill()
	status, body = m.api("POST", "/api/v1/nodes/hvictim/reset-identity", "")
	if status != 200 || !strings.Contains(body, `"name":"hvictim"`) {
		t.Fatalf("reset identity: %d %s", status, body)
	}
	replacement := newKey(t)
	replHost := fakeNodeHost(t, "hvictim", "boot2")
	if status, body := m.register(registration{name: "hvictim", host: replHost, bootID: "boot2", signer: replacement}); status != 200 {
		t.Errorf("register the replaced machine after reset: %d %s", status, body)
	}
	if got := rowOf("hvictim"); got != replHost+" auto worker" {
		t.Errorf("hvictim row after the replacement registered: %s", got)
	}
	if status, body := m.register(registration{name: "hvictim", host: thiefHost, signer: thief}); status != http.StatusConflict {
		t.Errorf("take over hvictim after it was re-bound: %d %s, want 409", status, body)
	}
	if status, body := m.register(registration{name: "hvictim", host: replHost, bootID: "boot2", signer: replacement}); status != 200 {
		t.Errorf("the replacement registers again with its key: %d %s", status, body)
	}
	if _, events := m.api("GET", "/api/v1/events?limit=200", ""); !strings.Contains(events, "node.reset_identity") {
		t.Errorf("no node.reset_identity event recorded")
	}
}

// Case 10: a cookie replayed after logout is dead.
func (f *hostileFleet) logoutReplay(t *testing.T) {
	m := f.m
	c := noRedirectClient()
	status, _, _ := do(t, c, formReq(m.URL+"/login", url.Values{"username": {"admin"}, "password": {adminPassword}}))
	if status != http.StatusSeeOther {
		t.Fatalf("login: %d", status)
	}
	u, _ := url.Parse(m.URL)
	cookies := c.Jar.Cookies(u)
	if len(cookies) == 0 {
		t.Fatal("login set no cookie")
	}
	replay := func(path string) (int, http.Header) {
		req, _ := http.NewRequest("GET", m.URL+path, nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		status, _, h := do(t, noRedirectClient(), req)
		return status, h
	}
	if status, _ := replay("/api/v1/nodes"); status != 200 {
		t.Fatalf("the fresh cookie: %d", status)
	}
	req := formReq(m.URL+"/logout", url.Values{})
	if status, _, _ := do(t, c, req); status != http.StatusSeeOther {
		t.Fatalf("logout: %d", status)
	}
	if status, _ := replay("/api/v1/nodes"); status != http.StatusUnauthorized {
		t.Errorf("cookie replayed after logout on /api/v1/nodes: %d, want 401", status)
	}
	if status, h := replay("/nodes"); status/100 != 3 || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Errorf("cookie replayed after logout on /nodes: %d to %q, want a redirect to /login", status, h.Get("Location"))
	}
}

func formReq(u string, v url.Values) *http.Request {
	req, _ := http.NewRequest("POST", u, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// Case 11: next after login is only ever a plain same-site path.
func (f *hostileFleet) loginNext(t *testing.T) {
	m := f.m
	for _, next := range []string{"/\t/evil.example", "/\\/evil.example", "//evil.example", "/\\evil.example",
		"https://evil.example/", "/%2F/evil.example", "/\n/evil.example", " //evil.example"} {
		// A bare round trip: http.Client refuses to parse a Location holding
		// control characters, which is exactly what must be looked at.
		resp, err := http.DefaultTransport.RoundTrip(formReq(m.URL+"/login",
			url.Values{"username": {"admin"}, "password": {adminPassword}, "next": {next}}))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		status, loc := resp.StatusCode, resp.Header.Get("Location")
		pu, err := url.Parse(loc)
		if status != http.StatusSeeOther || err != nil || pu.Host != "" || pu.Scheme != "" || !strings.HasPrefix(loc, "/") ||
			strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\t\r\n") {
			t.Errorf("login with next=%q: %d to %q, want a same-site path", next, status, loc)
		}
	}
	// A plain path is kept.
	_, _, h := do(t, noRedirectClient(), formReq(m.URL+"/login", url.Values{"username": {"admin"}, "password": {adminPassword}, "next": {"/tasks"}}))
	if loc := h.Get("Location"); loc != "/tasks" {
		t.Errorf("login with next=/tasks went to %q", loc)
	}
}

// Case 12: credentials of a task are never shown, and workers still get them.
func (f *hostileFleet) maskedSecrets(t *testing.T) {
	m := f.m
	host := strings.TrimPrefix(f.tg.URL, "http://")
	body := func(auth, token, userinfo string) string {
		return `{"title":"secret task","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"http://` + userinfo + `@` + host + `/secret","headers":{"Authorization":"` + auth + `","X-Token":"{{TOKEN}}"}},
		"params":{"TOKEN":"` + token + `"},"secret_params":["TOKEN"],"timeout":"5s","executors":["hw1"]}`
	}
	tk := f.task(t, body("Bearer secret123", "paramsecret456", "user:urlpass789"))
	secrets := []string{"secret123", "paramsecret456", "urlpass789"}
	shown := func(when string) {
		t.Helper()
		for _, p := range []string{"/api/v1/tasks/" + tk.ID, "/api/v1/tasks?limit=500", "/tasks/" + tk.ID, "/tasks/" + tk.ID + "/edit", "/tasks"} {
			status, page := m.api("GET", p, "")
			if status != 200 {
				t.Errorf("%s: GET %s: %d", when, p, status)
			}
			for _, s := range secrets {
				if strings.Contains(page, s) {
					t.Errorf("%s: GET %s shows %q", when, p, s)
				}
			}
		}
		if _, js := m.api("GET", "/api/v1/tasks/"+tk.ID, ""); !strings.Contains(js, protocol.SecretMask) {
			t.Errorf("%s: task JSON does not show the mask: %s", when, js)
		}
	}
	received := func(when string, n int) {
		t.Helper()
		m.taskAction(tk.ID, "run")
		waitFor(t, 20*time.Second, when+": the target is called", func() bool { return f.tg.count("/secret") >= n })
		h := f.tg.lastHeader("/secret")
		if h.Get("Authorization") != "Bearer secret123" || h.Get("X-Token") != "paramsecret456" {
			t.Errorf("%s: the target received Authorization %q X-Token %q, want the real values", when, h.Get("Authorization"), h.Get("X-Token"))
		}
	}
	shown("after create")
	received("after create", 1)
	// An update that sends the masks back keeps the stored values.
	if status, resp := m.api("PUT", "/api/v1/tasks/"+tk.ID, body(protocol.SecretMask, protocol.SecretMask, "user:"+protocol.SecretMask)); status != 200 {
		t.Fatalf("update with the masks: %d %s", status, resp)
	}
	shown("after an update with the masks")
	received("after an update with the masks", 2)
}

// Case 13: a Connect with a wrong key gets the same answer whatever master
// name it claims, so the --workerof name cannot be probed.
func (f *hostileFleet) connectProbe(t *testing.T) {
	try := func(masterName string) (int, string) {
		ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), protocol.NewNonce()
		b, _ := json.Marshal(protocol.ConnectRequest{Node: protocol.NodeConfig{Name: "hman", Protocol: "http", Host: f.manHost, Priority: 1, MaxConcurrency: 10}})
		req, _ := http.NewRequest("POST", "http://"+f.manHost+protocol.PathConnect, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(protocol.HeaderMaster, masterName)
		req.Header.Set(protocol.HeaderNameTo, "hman")
		req.Header.Set(protocol.HeaderTimestamp, ts)
		req.Header.Set(protocol.HeaderNonce, nonce)
		req.Header.Set(protocol.HeaderConnection, protocol.ConnectMAC("wrong-cluster-key-0123456789", masterName, "hman", ts, nonce))
		status, body, _ := do(t, http.DefaultClient, req)
		return status, body
	}
	s1, b1 := try("other-master")
	s2, b2 := try("master")
	if s1 != s2 || b1 != b2 {
		t.Errorf("wrong key: with a wrong master name %d %s; with the right one %d %s; want the same answer", s1, b1, s2, b2)
	}
	if s2 != http.StatusUnauthorized {
		t.Errorf("wrong key: %d %s, want 401", s2, b2)
	}
}

// Case 15: schedules that cannot fire as written, and header values that
// become multi-line after substitution, are refused at creation.
func (f *hostileFleet) badSchedules(t *testing.T) {
	m := f.m
	before := f.snapshot(t)
	target := f.tg.URL + "/never"
	for _, tc := range []struct{ schedule, field string }{
		{`{"kind":"interval","every":"1ms"}`, "schedule.every"},
		{`{"kind":"interval","every":"0s"}`, "schedule.every"},
		{`{"kind":"interval","every":"-1s"}`, "schedule.every"},
		{`{"kind":"cron","cron":"@every 1ms"}`, "schedule.cron"},
		{`{"kind":"cron","cron":"@every 0s"}`, "schedule.cron"},
		{`{"kind":"cron","cron":"@every -1s"}`, "schedule.cron"},
		{`{"kind":"cron","cron":"0 0 30 2 *"}`, "schedule.cron"},
	} {
		status, body := m.api("POST", "/api/v1/tasks", `{"title":"cannot work","type":"http","schedule":`+tc.schedule+`,
			"http":{"url":"`+target+`"},"executors":["hw1"]}`)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.field) {
			t.Errorf("schedule %s: %d %s, want 400 naming %s", tc.schedule, status, body, tc.field)
		}
	}
	status, body := m.api("POST", "/api/v1/tasks", `{"title":"header injection","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"url":"`+target+`","headers":{"X":"{{P}}"}},"params":{"P":"\r\nEvil: 1"},"executors":["hw1"]}`)
	if status != http.StatusBadRequest || !strings.Contains(strings.ToLower(body), "header") {
		t.Errorf("header that becomes multi-line: %d %s, want 400 naming the header", status, body)
	}
	if after := f.snapshot(t); after != before {
		t.Errorf("refused tasks changed something:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the master's peak RSS: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Skip("no VmHWM in /proc/<pid>/status")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// multipartBody streams a multipart form of about size bytes without
// allocating it.
type multipartBody struct {
	head, tail []byte
	fill       int64
	chunk      []byte
}

func newMultipartBody(boundary string, size int64) *multipartBody {
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\nadmin\r\n--" + boundary +
		"\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nwrong\r\n--" + boundary +
		"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	return &multipartBody{head: []byte(head), tail: []byte(tail), fill: size, chunk: bytes.Repeat([]byte("A"), 32<<10)}
}

func (b *multipartBody) len() int64 { return int64(len(b.head)) + b.fill + int64(len(b.tail)) }

func (b *multipartBody) Read(p []byte) (int, error) {
	switch {
	case len(b.head) > 0:
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	case b.fill > 0:
		c := b.chunk
		if int64(len(c)) > b.fill {
			c = c[:b.fill]
		}
		n := copy(p, c)
		b.fill -= int64(n)
		return n, nil
	case len(b.tail) > 0:
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	return 0, io.EOF
}

// Case 3: six 40 MB multipart posts to the login form are refused and do not
// grow the master's peak RSS by 50 MB.
func TestHostileMultipartLoginMemory(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	pid := m.cmd.Process.Pid
	before := vmHWM(t, pid)
	var wg sync.WaitGroup
	results := make([]string, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			const boundary = "hostileboundary0123456789"
			b := newMultipartBody(boundary, 40<<20)
			req, _ := http.NewRequest("POST", m.URL+"/login", b)
			req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
			if i%2 == 0 {
				req.ContentLength = b.len()
			} else {
				req.ContentLength = -1 // chunked: the limit must hold without a length
			}
			resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				// The server refused by closing the connection before reading it all.
				results[i] = "closed: " + err.Error()
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results[i] = strconv.Itoa(resp.StatusCode)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != "413" && r != "415" && !strings.HasPrefix(r, "closed: ") {
			t.Errorf("40 MB multipart login %d: %s, want 413 or 415", i, r)
		}
	}
	after := vmHWM(t, pid)
	t.Logf("master peak RSS %d KiB before, %d KiB after six 40 MB multipart posts (%v)", before, after, results)
	if grow := after - before; grow >= 50<<10 {
		t.Errorf("master peak RSS grew by %d KiB, want under 50 MiB", grow)
	}
	if status, _ := m.api("GET", "/health", ""); status != 200 {
		t.Errorf("master health after the uploads: %d", status)
	}
}

// timeoutFlag returns the flag of a subcommand that shortens its servers'
// read timeout, or "" when there is none.
func timeoutFlag(t *testing.T, cmd string) string {
	out, _ := exec.Command(binPath, "help", cmd).CombinedOutput()
	if m := regexp.MustCompile(`--((?:http-)?read-timeout)\b`).FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return ""
}

// trickle sends headers announcing a body and then drips it a byte at a time;
// it returns how long the server let the connection live.
func trickle(t *testing.T, addr, path string, bound time.Duration) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", path, addr)
	closed := make(chan struct{})
	go func() {
		// The server's answer (an error status) or EOF: either way it is done with us.
		_, _ = bufio.NewReader(conn).ReadString(0)
		close(closed)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(bound)
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-deadline:
			t.Fatalf("%s%s: a trickled body still open after %s", addr, path, bound)
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				<-closed
				return time.Since(start)
			}
		}
	}
}

// Case 4: a body trickled a byte at a time is cut off by master and worker.
func TestHostileSlowBodyCutOff(t *testing.T) {
	t.Parallel()
	mFlag, wFlag := timeoutFlag(t, "master"), timeoutFlag(t, "worker")
	if mFlag == "" && wFlag == "" {
		t.Skip("neither master nor worker has a --read-timeout flag (or env var) to shorten the default ~30s server timeouts for a process test; the cut-off is covered by in-process server tests")
	}
	var margs []string
	if mFlag != "" {
		margs = []string{"--" + mFlag, "2s"}
	}
	m := startMaster(t, "", margs...)
	if mFlag != "" {
		took := trickle(t, strings.TrimPrefix(m.URL, "http://"), "/api/v1/tasks", 20*time.Second)
		t.Logf("master cut a trickled body after %s (read timeout 2s)", took.Round(time.Millisecond))
	} else {
		t.Log("master has no --read-timeout flag: its sub-case is not run")
	}
	if wFlag == "" {
		t.Skip("worker has no --read-timeout flag to shorten its server timeouts for a process test")
	}
	_, host := startWorker(t, m, "hslow", "--"+wFlag, "2s")
	took := trickle(t, host, protocol.PathTaskStart, 20*time.Second)
	t.Logf("worker cut a trickled body after %s (read timeout 2s)", took.Round(time.Millisecond))
}

// Case 7: spoofed X-Forwarded-For / X-Real-IP neither bypass the login
// throttle nor reach the log.
func TestHostileLoginThrottleIgnoresForwardedFor(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	c := noRedirectClient()
	throttled, other := 0, map[int]int{}
	for i := range 300 {
		req := formReq(m.URL+"/login", url.Values{"username": {"admin"}, "password": {fmt.Sprintf("guess-%d", i)}})
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i%250+1))
		req.Header.Set("X-Real-IP", fmt.Sprintf("198.51.100.%d", i%250+1))
		status, _, _ := do(t, c, req)
		if status == http.StatusTooManyRequests {
			throttled++
		} else {
			other[status]++
		}
	}
	t.Logf("300 guesses with spoofed forwarding headers: %d throttled, others %v", throttled, other)
	if throttled < 250 {
		t.Errorf("only %d of 300 guesses throttled, want most (the per-address limit is a few dozen)", throttled)
	}
	if other[http.StatusOK] > 0 || other[http.StatusSeeOther] > 0 {
		t.Errorf("a wrong password logged in: %v", other)
	}
	for _, l := range m.snapshot() {
		if strings.Contains(l, "203.0.113.") || strings.Contains(l, "198.51.100.") {
			t.Errorf("the master logged a spoofed address: %s", l)
			break
		}
	}
	if !m.logged("127.0.0.1") {
		t.Error("the master's log does not name the real peer 127.0.0.1")
	}
}

// missing is what mode returns for a file that does not exist.
const missing os.FileMode = 1 << 31

// mode returns a file's permission bits, or missing.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return missing
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func wantMode(t *testing.T, when, path string, want os.FileMode) {
	t.Helper()
	if got := mode(t, path); got != want {
		if got == missing {
			t.Errorf("%s: %s does not exist", when, path)
			return
		}
		t.Errorf("%s: %s has mode %#o, want %#o", when, path, got, want)
	}
}

// Case 14: the data dirs are 0700 and the database, spool and node key 0600,
// also when they already exist with looser modes.
func TestHostileDataFileModes(t *testing.T) {
	t.Parallel()
	mdir := filepath.Join(t.TempDir(), "master")
	if err := os.Mkdir(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mdir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	db := filepath.Join(mdir, "schedulemaster.db")
	m := startMaster(t, mdir)
	wantMode(t, "fresh master", mdir, 0o700)
	wantMode(t, "fresh master", db, 0o600)

	wdir := filepath.Join(t.TempDir(), "worker")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(wdir, 0o755)
	spool := filepath.Join(wdir, "runs.spool")
	if err := os.WriteFile(spool, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(spool, 0o644)
	w, _ := startWorker(t, m, "hmodes", "--data-dir", wdir)
	m.waitNode("hmodes", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	key := filepath.Join(wdir, "node.key")
	wantMode(t, "worker on a 0755 dir with a 0644 spool", wdir, 0o700)
	wantMode(t, "worker on a 0755 dir with a 0644 spool", spool, 0o600)
	wantMode(t, "worker on a 0755 dir with a 0644 spool", key, 0o600)

	// Loosen everything while both are stopped, then start them again.
	if err := w.term(); err != nil {
		t.Fatalf("worker exit: %v", err)
	}
	if err := m.term(); err != nil {
		t.Fatalf("master exit: %v", err)
	}
	for _, p := range []string{mdir, wdir} {
		_ = os.Chmod(p, 0o755)
	}
	for _, p := range []string{db, db + "-wal", db + "-shm", spool, key} {
		if _, err := os.Stat(p); err == nil {
			_ = os.Chmod(p, 0o644)
		}
	}
	m2 := startMaster(t, mdir)
	wantMode(t, "restarted master", mdir, 0o700)
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if mode(t, p) != missing || p == db {
			wantMode(t, "restarted master", p, 0o600)
		}
	}
	startWorker(t, m2, "hmodes", "--data-dir", wdir)
	m2.waitNode("hmodes", 20*time.Second, "running again with its key", func(n *nodeJSON) bool { return n.Status == 2 })
	wantMode(t, "restarted worker", wdir, 0o700)
	wantMode(t, "restarted worker", key, 0o600)
	if mode(t, spool) != missing {
		wantMode(t, "restarted worker", spool, 0o600)
	}
}
