package master_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// testPasswordCost is bcrypt's lowest cost: under the race detector a
// comparison at the default cost takes most of a second of CPU, and the
// tests make and check many passwords.
const testPasswordCost = 4

const (
	clusterKey   = "master-test-cluster-key-0123456789"
	masterName   = "master"
	probeTimeout = 300 * time.Millisecond
)

// env is one master over a fresh real store.
type env struct {
	t   *testing.T
	ctx context.Context
	s   storetest.NamedStore
	m   *master.Master
}

func newEnv(t *testing.T, s storetest.NamedStore, edit ...func(*master.Config)) *env {
	t.Helper()
	return &env{t: t, ctx: storetest.Ctx(t), s: s, m: newMaster(t, s, edit...)}
}

func newMaster(t *testing.T, s storetest.NamedStore, edit ...func(*master.Config)) *master.Master {
	cfg := master.Config{PasswordCost: testPasswordCost,
		Identity: masterName, ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health:      master.HealthConfig{Interval: time.Second, Timeout: probeTimeout, MaxFailures: 3},
		CallTimeout: 5 * time.Second, ShutdownWait: 2 * time.Second,
	}
	for _, e := range edit {
		e(&cfg)
	}
	m := master.New(cfg, s.Store, storetest.Logger(t))
	// Stop before the store closes (cleanups run last-in first-out), so no
	// background work of this master outlives the test.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	return m
}

func (e *env) node(name string) *store.Node {
	e.t.Helper()
	n, err := store.GetNode(e.ctx, e.s.Store.DB, name)
	if err != nil {
		e.t.Fatalf("GetNode(%q): %v", name, err)
	}
	return n
}

// snapshot renders every column of a node, to prove an action changed nothing.
func (e *env) snapshot(name string) string {
	e.t.Helper()
	return fmt.Sprintf("%+v", *e.node(name))
}

func (e *env) countNodes() int {
	e.t.Helper()
	ns, err := store.ListNodes(e.ctx, e.s.Store.DB)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(ns)
}

func (e *env) insertClaim(task, node string) {
	e.t.Helper()
	_, err := e.s.Store.DB.ExecContext(e.ctx, "INSERT INTO locks (task_id, fire_at, node, created_at) VALUES (?, ?, ?, ?)",
		task, time.Now().UTC(), node, time.Now().UTC())
	if err != nil {
		e.t.Fatalf("insert claim: %v", err)
	}
}

func (e *env) claimsOf(node string) int {
	e.t.Helper()
	var n int
	if err := e.s.Store.DB.QueryRowContext(e.ctx, "SELECT COUNT(*) FROM locks WHERE node = ?", node).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// addMasterNode records the master's own node the way Master.Start does,
// without starting the health checker.
func (e *env) addMasterNode() {
	e.t.Helper()
	self := &store.Node{Name: masterName, Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", BootID: e.m.BootID(), MaxConcurrency: 1}
	if err := store.UpsertRegisteredNode(e.ctx, e.s.Store.DB, self); err != nil {
		e.t.Fatal(err)
	}
}

// testWorker is a real worker engine served by the real worker router on a
// loopback listener that outlives the engine: Replace swaps in a new engine
// (a restarted worker process) on the same address.
type testWorker struct {
	t       *testing.T
	cfg     worker.Config
	W       *worker.Worker
	Srv     *httptest.Server
	Host    string
	handler atomic.Pointer[http.Handler]
}

func autoCfg(masterURL string) func(*worker.Config) {
	return func(c *worker.Config) { c.AutoRegister, c.WorkerOf, c.MasterURL = true, "", masterURL }
}

func startWorker(t *testing.T, name string, edit ...func(*worker.Config)) *testWorker {
	t.Helper()
	tw := &testWorker{t: t}
	tw.Srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h := tw.handler.Load()
		if h == nil {
			http.Error(rw, `{"error":"no worker"}`, http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(rw, r)
	}))
	tw.Srv.Start()
	t.Cleanup(tw.Srv.Close)
	tw.Host = tw.Srv.Listener.Addr().String()
	port, _ := strconv.Atoi(tw.Host[len("127.0.0.1:"):])
	tw.cfg = worker.Config{
		Identity: name, Protocol: "http", IP: "127.0.0.1", Port: port, Priority: 1, MaxConcurrency: 10,
		ClusterKey: clusterKey, WorkerOf: masterName, StopTimeout: 2 * time.Second,
		// The node key lives here, so a Replace (a restarted process) keeps it.
		DataDir: t.TempDir(),
	}
	for _, e := range edit {
		e(&tw.cfg)
	}
	tw.Replace()
	return tw
}

// Replace starts a new worker engine (new boot id and secret) on the same address.
func (tw *testWorker) Replace() *worker.Worker {
	tw.t.Helper()
	w, err := worker.New(tw.cfg, storetest.Logger(tw.t))
	if err != nil {
		tw.t.Fatal(err)
	}
	tw.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx) // may fail to reach a master; only frees the scheduler
	})
	tw.W = w
	tw.Serve(worker.NewHandler(w, storetest.Logger(tw.t)))
	if !tw.cfg.AutoRegister {
		runWorker(tw.t, w) // a manual worker waits for Connect: it runs at once
	}
	return w
}

// Serve swaps the handler on the worker's address.
func (tw *testWorker) Serve(h http.Handler) { tw.handler.Store(&h) }

// Router is the real worker router of the current engine.
func (tw *testWorker) Router() http.Handler {
	return worker.NewHandler(tw.W, storetest.Logger(tw.t))
}

func (tw *testWorker) Config() protocol.NodeConfig {
	return protocol.NodeConfig{Name: tw.cfg.Identity, Protocol: "http", Host: tw.Host, Priority: 1, MaxConcurrency: 10}
}

// create adds the worker as a manual node; connect and enable are optional steps.
func (e *env) create(tw *testWorker) *store.Node {
	e.t.Helper()
	n, err := e.m.Nodes().Create(e.ctx, tw.Config())
	if err != nil {
		e.t.Fatalf("CreateNode(%s): %v", tw.cfg.Identity, err)
	}
	return n
}

func (e *env) connect(name string) *store.Node {
	e.t.Helper()
	n, err := e.m.Nodes().Connect(e.ctx, name)
	if err != nil {
		e.t.Fatalf("ConnectNode(%s): %v", name, err)
	}
	return n
}

func (e *env) enable(name string) *store.Node {
	e.t.Helper()
	n, err := e.m.Nodes().Enable(e.ctx, name)
	if err != nil {
		e.t.Fatalf("EnableNode(%s): %v", name, err)
	}
	return n
}

// masterAPI is the master's real router (the API workers call included)
// over the engine of e.
func (e *env) masterAPI() http.Handler {
	e.t.Helper()
	h, err := handlers.NewMasterRouter(e.ctx, handlers.MasterDeps{Master: e.m, Log: storetest.Logger(e.t)})
	if err != nil {
		e.t.Fatalf("NewMasterRouter: %v", err)
	}
	return h
}

// writeErr answers 503 with a JSON error body, as a master that is not up.
func writeErr(rw http.ResponseWriter, err error) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(rw).Encode(protocol.ErrorResponse{Error: err.Error()})
}

// serveMaster serves the master's router on loopback and returns its URL.
func (e *env) serveMaster() string {
	srv := httptest.NewServer(e.masterAPI())
	e.t.Cleanup(srv.Close)
	return srv.URL
}

// runWorker runs w until the test ends (Run, then Stop at cleanup) and
// waits until it is ready: registered in auto mode, at once in manual mode.
// A worker Run already runs is only waited for.
func runWorker(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-w.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("worker not ready (registered) within 20s")
	}
}

func isFieldErrors(err error, field string) bool {
	var fe protocol.FieldErrors
	return errors.As(err, &fe) && (field == "" || fe[field] != "")
}
