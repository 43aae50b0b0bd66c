package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
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

// clusterMaster is one master of a cluster as a worker sees it: it takes
// registrations (answering with the cluster's name and tasks), grants every
// claim and accepts every run report, counting what reached it.
type clusterMaster struct {
	tasks  []protocol.TaskSpec
	claims atomic.Int32
	runs   atomic.Int32
	regs   atomic.Int32
}

func (m *clusterMaster) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case protocol.PathMasterRegister:
		m.regs.Add(1)
		json.NewEncoder(rw).Encode(protocol.RegisterResponse{Master: masterName, Tasks: m.tasks})
	case protocol.PathMasterClaim:
		m.claims.Add(1)
		json.NewEncoder(rw).Encode(protocol.ClaimResponse{Won: true, Winner: r.Header.Get(protocol.HeaderNode)})
	case protocol.PathMasterRuns:
		var req protocol.RunsRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(rw, `{"error":"bad body"}`, http.StatusBadRequest)
			return
		}
		m.runs.Add(int32(len(req.Runs)))
		json.NewEncoder(rw).Encode(protocol.RunsResponse{Accepted: len(req.Runs)})
	case protocol.PathMasterOffline:
		rw.Write([]byte("{}"))
	default:
		http.NotFound(rw, r)
	}
}

// logBuffer collects a worker's log lines, so a test can see which master
// it says it uses.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) has(parts ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, line := range strings.Split(b.buf.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// deadURL is the URL of a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	return "http://127.0.0.1:" + strconv.Itoa(freePort(t))
}

// A worker given [dead, A, B] registers, claims and delivers runs through A,
// saying so; when A dies, claims and runs go on through B.
func TestWorkerFailsOverAlongItsMasters(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	// Two executors: every fire is claimed through a master.
	task := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)},
		HTTP:     &protocol.HTTPSpec{URL: target.URL}}, Executors: 2}
	task.Normalize()
	a, b := &clusterMaster{tasks: []protocol.TaskSpec{task}}, &clusterMaster{tasks: []protocol.TaskSpec{task}}
	asrv, bsrv := httptest.NewServer(a), httptest.NewServer(b)
	t.Cleanup(asrv.Close)
	t.Cleanup(bsrv.Close)
	dead := deadURL(t)

	logs := &logBuffer{}
	cfg := manualConfig("fo1")
	cfg.AutoRegister, cfg.WorkerOf, cfg.Port = true, "", freePort(t)
	cfg.MasterURL = dead + ", " + asrv.URL + "/," + bsrv.URL
	w, err := worker.New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	run(t, w)
	if a.regs.Load() != 1 || b.regs.Load() != 0 {
		t.Fatalf("registrations: A %d, B %d; want A 1, B 0", a.regs.Load(), b.regs.Load())
	}
	if !logs.has("now using the next master", "failed="+dead, "master="+asrv.URL) {
		t.Errorf("no log line says the worker moved from %s to %s:\n%s", dead, asrv.URL, logs.buf.String())
	}
	if !logs.has("registered with the master", "url="+asrv.URL) {
		t.Errorf("the registration does not name the master used:\n%s", logs.buf.String())
	}
	testutil.Eventually(t, 15*time.Second, func() bool { return a.claims.Load() >= 1 && a.runs.Load() >= 1 },
		"no claim and run through A (claims %d, runs %d)", a.claims.Load(), a.runs.Load())

	// A dies: the next calls fail to connect and move on to B.
	asrv.Close()
	claimsB, runsB := b.claims.Load(), b.runs.Load()
	testutil.Eventually(t, 15*time.Second, func() bool { return b.claims.Load() >= claimsB+2 && b.runs.Load() >= runsB+2 },
		"claims and runs did not move to B (claims %d, runs %d)", b.claims.Load(), b.runs.Load())
	if !logs.has("now using the next master", "failed="+asrv.URL, "master="+bsrv.URL) {
		t.Errorf("no log line says the worker moved from %s to %s:\n%s", asrv.URL, bsrv.URL, logs.buf.String())
	}
	if b.regs.Load() != 0 {
		t.Errorf("the worker registered again with B (%d); its secret stays valid cluster-wide", b.regs.Load())
	}
	if st := w.ReportStats(); st.Dropped != 0 || st.Overflow != 0 {
		t.Errorf("reports lost on failover: %+v", st)
	}
}

// One URL, as before the list: registration works and a failure is retried
// against the same master.
func TestWorkerSingleMasterURL(t *testing.T) {
	t.Parallel()
	fm := &fakeMaster{}
	fm.failures.Store(2)
	msrv := httptest.NewServer(fm)
	t.Cleanup(msrv.Close)
	cfg := manualConfig("one1")
	cfg.AutoRegister, cfg.WorkerOf, cfg.MasterURL, cfg.Port = true, "", msrv.URL+"/", freePort(t)
	w := newWorker(t, cfg)
	run(t, w)
	fm.mu.Lock()
	n := len(fm.regs)
	fm.mu.Unlock()
	if n != 1 || fm.failures.Load() >= 0 {
		t.Fatalf("registrations %d, failures left %d", n, fm.failures.Load())
	}
}
