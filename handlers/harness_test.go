package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// testPasswordCost is bcrypt's lowest cost for the masters of the tests:
// under the race detector a comparison at the default cost takes most of a
// second of CPU, and the tests make and check many passwords.
const testPasswordCost = bcrypt.MinCost

const clusterKey = "test-cluster-key-0123456789abcdef"

// env is a master served in-process on loopback over a real store.
type env struct {
	t   *testing.T
	st  *store.Store
	m   *master.Master
	srv *httptest.Server
}

func newEnv(t *testing.T, ns storetest.NamedStore, edit ...func(*master.Config)) *env {
	t.Helper()
	ctx := storetest.Ctx(t)
	log := storetest.Logger(t)
	cfg := master.Config{PasswordCost: testPasswordCost, Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: 500 * time.Millisecond, MaxFailures: 3}}
	for _, e := range edit {
		e(&cfg)
	}
	m := master.New(cfg, ns.Store, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: ns.Store, m: m, srv: srv}
	e.addUser("admin", "admin-password-1", store.RoleAdmin)
	return e
}

func (e *env) addUser(name, password, role string) {
	e.t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := store.CreateUser(context.Background(), e.st.DB, &store.User{Username: name, PasswordHash: string(hash), Role: role}); err != nil {
		e.t.Fatal(err)
	}
}

// client returns an HTTP client that keeps cookies and does not follow redirects.
func (e *env) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// login logs a fresh client in and returns it.
func (e *env) login(user, password string) *http.Client {
	e.t.Helper()
	c := e.client()
	resp := e.postForm(c, "/login", url.Values{"username": {user}, "password": {password}})
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("login %s: status %d, want 303", user, resp.StatusCode)
	}
	return c
}

func (e *env) postForm(c *http.Client, path string, v url.Values) *http.Response {
	e.t.Helper()
	resp, err := c.PostForm(e.srv.URL+path, v)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// do sends a request with optional JSON body and headers and returns status and body.
func (e *env) do(c *http.Client, method, path, body string, hdr map[string]string) (int, string) {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) node(name string) *store.Node {
	e.t.Helper()
	n, err := store.GetNode(context.Background(), e.st.DB, name)
	if err != nil {
		e.t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

func (e *env) nodeCount() int {
	e.t.Helper()
	nodes, err := store.ListNodes(context.Background(), e.st.DB)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(nodes)
}

// startWorker serves a real worker engine on loopback and returns it with its host.
func startWorker(t *testing.T, cfg worker.Config) (*worker.Worker, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	host := srv.Listener.Addr().String()
	u, _ := url.Parse("http://" + host)
	cfg.IP, cfg.Protocol = u.Hostname(), "http"
	port := u.Port()
	for _, ch := range port {
		cfg.Port = cfg.Port*10 + int(ch-'0')
	}
	if cfg.ClusterKey == "" {
		cfg.ClusterKey = clusterKey
	}
	if cfg.Priority == 0 {
		cfg.Priority = 1
	}
	if cfg.MaxConcurrency == 0 {
		cfg.MaxConcurrency = 5
	}
	w, err := worker.New(cfg, storetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = worker.NewHandler(w, storetest.Logger(t))
	srv.Start()
	t.Cleanup(srv.Close)
	// Stop ends what Run started (and releases what New prepared): no
	// goroutine outlives the test.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	if !cfg.AutoRegister {
		runWorker(t, w) // a manual worker waits for Connect: it runs at once
	}
	return w, host
}

// runWorker runs w until the test ends (Run, then Stop at cleanup) and
// waits until it has registered.
func runWorker(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-w.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("worker not registered within 20s")
	}
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

func ioCopy(w io.Writer, resp *http.Response) (int64, error) { return io.Copy(w, resp.Body) }
