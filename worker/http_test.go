package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// serveWorker serves the real worker API for w on a loopback ephemeral port.
func serveWorker(t *testing.T, w *worker.Worker) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(worker.NewHandler(w, testutil.Logger(t)))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url string, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func connectHTTP(t *testing.T, base, node string) (int, protocol.ConnectResponse, string) {
	t.Helper()
	h := good(node, time.Now())
	body, _ := json.Marshal(connectReq(node))
	code, resp := post(t, base+protocol.PathConnect, map[string]string{
		protocol.HeaderMaster: h.Master, protocol.HeaderNameTo: h.NameTo, protocol.HeaderTimestamp: h.Timestamp,
		protocol.HeaderNonce: h.Nonce, protocol.HeaderConnection: h.MAC,
	}, string(body))
	var out protocol.ConnectResponse
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(resp), &out); err != nil {
			t.Fatalf("connect answer %q: %v", resp, err)
		}
	}
	return code, out, resp
}

func TestHTTPConnect(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	srv := serveWorker(t, w)

	resp, err := http.Get(srv.URL + protocol.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	var h protocol.HealthResponse
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if h.Node != "w1" || h.BootID != w.BootID() || h.Status != protocol.StateWaiting {
		t.Errorf("health = %+v", h)
	}

	code, c1, raw := connectHTTP(t, srv.URL, "w1")
	if code != http.StatusOK || !w.CheckSecret(c1.Secret) || c1.BootID != w.BootID() {
		t.Fatalf("connect: %d %s", code, raw)
	}

	// A refused handshake over HTTP is a 401 with a JSON error, and changes nothing.
	hdr := good("w1", time.Now())
	body, _ := json.Marshal(connectReq("w1"))
	code, raw = post(t, srv.URL+protocol.PathConnect, map[string]string{
		protocol.HeaderMaster: masterName, protocol.HeaderNameTo: "w1", protocol.HeaderTimestamp: hdr.Timestamp,
		protocol.HeaderNonce: hdr.Nonce, protocol.HeaderConnection: protocol.ConnectMAC("wrong-key", masterName, "w1", hdr.Timestamp, hdr.Nonce),
	}, string(body))
	if code != http.StatusUnauthorized || !strings.Contains(raw, `"error"`) {
		t.Errorf("bad handshake over HTTP: %d %s", code, raw)
	}
	if strings.Contains(raw, c1.Secret) {
		t.Error("refused connect leaks the secret")
	}
	if !w.CheckSecret(c1.Secret) {
		t.Error("refused connect changed the secret")
	}
	// No headers at all.
	if code, raw := post(t, srv.URL+protocol.PathConnect, nil, string(body)); code != http.StatusUnauthorized {
		t.Errorf("connect without headers: %d %s", code, raw)
	}
	// Malformed or unknown-field bodies are 400.
	for _, b := range []string{"", "{", `{"node":{"name":"w1"},"extra":1}`} {
		if code, raw := post(t, srv.URL+protocol.PathConnect, nil, b); code != http.StatusBadRequest {
			t.Errorf("connect with body %q: %d %s", b, code, raw)
		}
	}
}

func TestHTTPSecretGuard(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	run(t, w)
	srv := serveWorker(t, w)
	startup := srv.URL + protocol.PathStartup
	shutdown := srv.URL + protocol.PathShutdown

	code, c1, raw := connectHTTP(t, srv.URL, "w1")
	if code != http.StatusOK {
		t.Fatalf("connect: %d %s", code, raw)
	}
	s1 := c1.Secret

	refused := func(label, url string, headers map[string]string, secrets ...string) {
		t.Helper()
		code, body := post(t, url, headers, `{"tasks":[]}`)
		if code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401 (%s)", label, code, body)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(body, s) {
				t.Errorf("%s: the 401 body reveals a secret: %s", label, body)
			}
		}
		if w.Health().Status == protocol.StateScheduling {
			t.Fatalf("%s: the worker started scheduling without the right secret", label)
		}
	}
	wrong := protocol.NewSecret()
	refused("no secret", startup, nil, s1)
	refused("empty secret", startup, map[string]string{protocol.HeaderSecret: ""}, s1)
	refused("wrong secret", startup, map[string]string{protocol.HeaderSecret: wrong}, s1, wrong)
	refused("secret prefix", startup, map[string]string{protocol.HeaderSecret: s1[:32]}, s1)
	refused("wrong secret on shutdown", shutdown, map[string]string{protocol.HeaderSecret: wrong}, s1, wrong)

	// Reconnect: s1 is rotated out at once.
	code, c2, raw := connectHTTP(t, srv.URL, "w1")
	if code != http.StatusOK || c2.Secret == s1 {
		t.Fatalf("reconnect: %d %s", code, raw)
	}
	refused("rotated-out secret", startup, map[string]string{protocol.HeaderSecret: s1}, s1, c2.Secret)

	code, body := post(t, startup, map[string]string{protocol.HeaderSecret: c2.Secret}, `{"tasks":[]}`)
	if code != http.StatusOK {
		t.Fatalf("startup with the current secret: %d %s", code, body)
	}
	if h := w.Health(); h.Status != protocol.StateScheduling {
		t.Errorf("after startup: %+v", h)
	}
	if strings.Contains(body, c2.Secret) {
		t.Error("the startup answer contains the secret")
	}
	// Bad body with the right secret: 400, state kept.
	if code, body := post(t, startup, map[string]string{protocol.HeaderSecret: c2.Secret}, `{"tasks":"x"}`); code != http.StatusBadRequest {
		t.Errorf("startup with a bad body: %d %s", code, body)
	}
	code, body = post(t, shutdown, map[string]string{protocol.HeaderSecret: c2.Secret}, `{}`)
	if code != http.StatusOK {
		t.Fatalf("shutdown: %d %s", code, body)
	}
	if h := w.Health(); h.Status != protocol.StateIdle || h.RunningTasks != 0 {
		t.Errorf("after shutdown: %+v", h)
	}
	// /health needs no secret; unknown routes are a JSON 404.
	if code, body := post(t, srv.URL+"/api/nope", map[string]string{protocol.HeaderSecret: c2.Secret}, `{}`); code != http.StatusNotFound {
		t.Errorf("unknown route: %d %s", code, body)
	}
}

// fakeMaster is a minimal master endpoint for registration and offline calls
// that checks the worker's signatures the way the real master does.
type fakeMaster struct {
	failures atomic.Int32 // answer 503 to this many registrations first
	mu       sync.Mutex
	regs     []protocol.RegisterRequest
	offline  []string // secrets sent with offline
}

func (f *fakeMaster) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case protocol.PathMasterRegister:
		if f.failures.Add(-1) >= 0 {
			http.Error(rw, `{"error":"database down"}`, http.StatusServiceUnavailable)
			return
		}
		node, ts, nonce := r.Header.Get(protocol.HeaderNode), r.Header.Get(protocol.HeaderTimestamp), r.Header.Get(protocol.HeaderNonce)
		if !protocol.EqualMAC(r.Header.Get(protocol.HeaderSignature), protocol.RegisterMAC(clusterKey, node, ts, nonce, body)) {
			http.Error(rw, `{"error":"bad signature"}`, http.StatusUnauthorized)
			return
		}
		var req protocol.RegisterRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(rw, `{"error":"bad body"}`, http.StatusBadRequest)
			return
		}
		// The node key signs the same facts: the master binds the name to it.
		if !protocol.VerifyRegistration(req.NodeKey, r.Header.Get(protocol.HeaderNodeSignature), node, ts, nonce, body) {
			http.Error(rw, `{"error":"bad node signature"}`, http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.regs = append(f.regs, req)
		f.mu.Unlock()
		json.NewEncoder(rw).Encode(protocol.RegisterResponse{Master: masterName})
	case protocol.PathMasterOffline:
		f.mu.Lock()
		f.offline = append(f.offline, r.Header.Get(protocol.HeaderSecret))
		f.mu.Unlock()
		rw.Write([]byte("{}"))
	default:
		http.NotFound(rw, r)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestRunRegistersWithRetryAndStopGoesOffline(t *testing.T) {
	t.Parallel()
	fm := &fakeMaster{}
	fm.failures.Store(1)
	msrv := httptest.NewServer(fm)
	t.Cleanup(msrv.Close)

	cfg := manualConfig("auto1")
	cfg.AutoRegister, cfg.WorkerOf, cfg.MasterURL, cfg.Port = true, "", msrv.URL, freePort(t)
	w := newWorker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	select {
	case <-w.Ready():
	case <-ctx.Done():
		t.Fatal("Run did not register within 20s")
	}
	fm.mu.Lock()
	regs := append([]protocol.RegisterRequest(nil), fm.regs...)
	fm.mu.Unlock()
	if len(regs) != 1 {
		t.Fatalf("%d registrations recorded, want 1 (after one refused attempt)", len(regs))
	}
	r := regs[0]
	if r.Node.Name != "auto1" || r.Node.Host != "127.0.0.1:"+strconv.Itoa(cfg.Port) || r.BootID != w.BootID() || !w.CheckSecret(r.Secret) {
		t.Errorf("registration = %+v", r)
	}
	if h := w.Health(); h.Status != protocol.StateScheduling {
		t.Errorf("after registration: %+v", h)
	}
	// After registering, the master it registered with may connect.
	now := time.Now()
	if _, err := w.Connect(good("auto1", now), connectReq("auto1"), now); err != nil {
		t.Errorf("connect from the master it registered with: %v", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Run did not return after Stop")
	}
	fm.mu.Lock()
	offline := append([]string(nil), fm.offline...)
	fm.mu.Unlock()
	if len(offline) != 1 || !w.CheckSecret(offline[0]) {
		t.Errorf("offline calls %d, secret accepted=%v", len(offline), len(offline) == 1 && w.CheckSecret(offline[0]))
	}
	if h := w.Health(); h.Status == protocol.StateScheduling {
		t.Errorf("still scheduling after Stop: %+v", h)
	}
}

func TestRunStopsRetryingWhenCancelled(t *testing.T) {
	t.Parallel()
	fm := &fakeMaster{}
	fm.failures.Store(1 << 20)
	msrv := httptest.NewServer(fm)
	t.Cleanup(msrv.Close)
	cfg := manualConfig("auto1")
	cfg.AutoRegister, cfg.WorkerOf, cfg.MasterURL = true, "", msrv.URL
	w := newWorker(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	testutil.Eventually(t, 10*time.Second, func() bool { return fm.failures.Load() < 1<<20 }, "Run never tried to register")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept retrying after its context was cancelled")
	}
	if w.Health().Status == protocol.StateScheduling {
		t.Error("a worker that never registered is scheduling")
	}
}

func TestRunManualIsReadyAtOnce(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	msrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(msrv.Close)
	cfg := manualConfig("w1")
	cfg.MasterURL = msrv.URL
	w := newWorker(t, cfg)
	done := make(chan struct{})
	go func() { w.Run(context.Background()); close(done) }()
	select {
	case <-w.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("manual Run was not ready")
	}
	if hits.Load() != 0 {
		t.Error("a manual worker called the master")
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Errorf("Stop of an unconnected worker: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Stop")
	}
	if hits.Load() != 0 {
		t.Error("an unconnected manual worker told the master it goes offline")
	}
}

// The ServeMux keeps the answers of the gin router it replaced: a known path
// with another method is a JSON 404 like any unknown route, task operations
// answer a TaskReply, and a body with data after the JSON value is a 400.
func TestHandlerRoutesAndReplies(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	srv := serveWorker(t, w)
	code, c, raw := connectHTTP(t, srv.URL, "w1")
	if code != http.StatusOK {
		t.Fatalf("connect: %d %s", code, raw)
	}
	auth := map[string]string{protocol.HeaderSecret: c.Secret}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+protocol.PathTaskStop, nil)
		req.Header.Set(protocol.HeaderSecret, c.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"error":"no such route"`) {
			t.Errorf("%s %s: %d %s, want a JSON 404", m, protocol.PathTaskStop, resp.StatusCode, b)
		}
	}
	if code, body := post(t, srv.URL+protocol.PathHealth, nil, `{}`); code != http.StatusNotFound {
		t.Errorf("POST /health: %d %s, want 404", code, body)
	}
	code, body := post(t, srv.URL+protocol.PathTaskStop, auth, `{"id":"t1"}`)
	var reply protocol.TaskReply
	if code != http.StatusOK || json.Unmarshal([]byte(body), &reply) != nil ||
		reply != (protocol.TaskReply{ID: "t1", Status: protocol.ReplyStopped}) {
		t.Errorf("stop: %d %s", code, body)
	}
	if code, body := post(t, srv.URL+protocol.PathTaskPause, auth, `{"id":"t1"} {}`); code != http.StatusBadRequest {
		t.Errorf("trailing data: %d %s, want 400", code, body)
	}
	if code, body := post(t, srv.URL+protocol.PathTaskPause, auth, ``); code != http.StatusBadRequest {
		t.Errorf("empty body: %d %s, want 400", code, body)
	}
}

// A batch of runs once is taken run by run: each started or refused as the
// single call would be, in order; an oversized batch is refused whole.
func TestRunOnceBatch(t *testing.T) {
	t.Parallel()
	w := newWorker(t, manualConfig("w1"))
	srv := serveWorker(t, w)
	code, c, raw := connectHTTP(t, srv.URL, "w1")
	if code != http.StatusOK {
		t.Fatalf("connect: %d %s", code, raw)
	}
	auth := map[string]string{protocol.HeaderSecret: c.Secret}
	at := time.Now().UTC()
	spec := func(id, url string) protocol.RunOnceRequest {
		s := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: id, Type: protocol.TaskHTTP,
			Schedule: protocol.Schedule{Kind: protocol.ScheduleOnce, At: &at}, HTTP: &protocol.HTTPSpec{URL: url}}, Executors: 1}
		return protocol.RunOnceRequest{ID: id, Task: &s}
	}
	req := protocol.RunOnceBatchRequest{Runs: []protocol.RunOnceRequest{
		spec("a", "http://127.0.0.1:1/a"), spec("b", "not a url"), {ID: "c"}, spec("d", "http://127.0.0.1:1/d")}}
	body, _ := json.Marshal(req)
	code, out := post(t, srv.URL+protocol.PathTaskRunOnceBatch, auth, string(body))
	var reply protocol.RunOnceBatchReply
	if code != http.StatusOK || json.Unmarshal([]byte(out), &reply) != nil || len(reply.Results) != 4 {
		t.Fatalf("batch: %d %s", code, out)
	}
	want := []int{http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound, http.StatusAccepted}
	for i, r := range reply.Results {
		if r.ID != req.Runs[i].ID || r.Status != want[i] || (r.Status != http.StatusAccepted) != (r.Error != "") {
			t.Errorf("result %d: %+v, want status %d", i, r, want[i])
		}
	}
	many := protocol.RunOnceBatchRequest{Runs: make([]protocol.RunOnceRequest, protocol.MaxRunOnceBatch+1)}
	for i := range many.Runs {
		many.Runs[i] = protocol.RunOnceRequest{ID: fmt.Sprint(i)}
	}
	body, _ = json.Marshal(many)
	if code, out := post(t, srv.URL+protocol.PathTaskRunOnceBatch, auth, string(body)); code != http.StatusBadRequest || !strings.Contains(out, "at most") {
		t.Errorf("%d runs: %d %s, want 400", len(many.Runs), code, out)
	}
	if code, _ := post(t, srv.URL+protocol.PathTaskRunOnceBatch, nil, string(body)); code != http.StatusUnauthorized {
		t.Errorf("without the secret: %d, want 401", code)
	}
}
