package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// drainMaster is a fake master: it registers a node with the given tasks,
// takes run reports, and records registrations (with their labels) and
// offline calls.
type drainMaster struct {
	srv   *httptest.Server
	tasks []protocol.TaskSpec

	mu      sync.Mutex
	runs    []protocol.RunReport
	regs    []protocol.RegisterRequest
	offline int
}

func newDrainMaster(t *testing.T, tasks ...protocol.TaskSpec) *drainMaster {
	m := &drainMaster{tasks: tasks}
	m.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch req.URL.Path {
		case protocol.PathMasterRegister:
			var body protocol.RegisterRequest
			if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			m.regs = append(m.regs, body)
			_ = json.NewEncoder(rw).Encode(protocol.RegisterResponse{Master: "m", Tasks: m.tasks})
		case protocol.PathMasterRuns:
			var body protocol.RunsRequest
			if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			m.runs = append(m.runs, body.Runs...)
			_ = json.NewEncoder(rw).Encode(protocol.RunsResponse{Accepted: len(body.Runs)})
		case protocol.PathMasterOffline:
			m.offline++
			_, _ = rw.Write([]byte("{}"))
		default:
			_, _ = rw.Write([]byte("{}"))
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// final returns the last final report of a task's runs ("" result: none).
func (m *drainMaster) final(task string) protocol.RunReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out protocol.RunReport
	for _, r := range m.runs {
		if r.TaskID == task && r.Result != protocol.ResultRunning {
			out = r
		}
	}
	return out
}

// A worker stopped while runs are in progress drains: it takes no new fire
// (its scheduled task stops firing, a run-once is refused), a run that ends
// within the drain timeout is reported as it ended, one still going at the
// end is killed and reported as killed with the reason, and the offline call
// reaches a master of the list that answers (the first one is gone).
func TestStopDrains(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var ticks atomic.Int64
	var lastTick atomic.Int64 // unix nanos of the last fire's arrival
	arrived := make(chan string, 8)
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/tick":
			ticks.Add(1)
			lastTick.Store(time.Now().UnixNano())
		case "/quick":
			arrived <- "quick"
			select {
			case <-release:
			case <-req.Context().Done():
			}
		case "/slow":
			arrived <- "slow"
			<-req.Context().Done() // never answers: the drain must kill it
		}
	}))
	t.Cleanup(target.Close)
	tick := httpSpec("tick", target.URL, protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)})
	gone := newDrainMaster(t, tick)
	live := newDrainMaster(t, tick)

	cfg := lifeConfig(t.TempDir(), gone.srv.URL+","+live.srv.URL)
	cfg.AutoRegister, cfg.StopTimeout = true, 2*time.Second
	cfg.Labels = protocol.Labels{"pool": "billing"}
	w, err := New(cfg, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	done := runAsync(context.Background(), w)
	waitReady(t, w)
	testutil.Eventually(t, 10*time.Second, func() bool { return ticks.Load() > 0 }, "the scheduled task never fired")
	for _, id := range []string{"quick", "slow"} {
		spec := httpSpec(id, target.URL, tick.Schedule)
		spec.Timeout = protocol.Duration(time.Minute)
		if err := w.RunOnce(protocol.RunOnceRequest{ID: id, Task: &spec}); err != nil {
			t.Fatalf("RunOnce %s: %v", id, err)
		}
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the run-once runs did not reach the target")
		}
	}
	gone.srv.Close() // the master in use is gone: the offline call must go to the next

	start := time.Now()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.StopTimeout+StopSlack)
		defer cancel()
		stopped <- w.Stop(ctx)
	}()
	testutil.Eventually(t, 5*time.Second, func() bool { return w.runner.draining.Load() }, "Stop did not start draining")
	spec := httpSpec("late", target.URL, tick.Schedule)
	if err := w.RunOnce(protocol.RunOnceRequest{ID: "late", Task: &spec}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("RunOnce while draining = %v, want ErrNotRunning", err)
	}
	close(release) // the quick run ends within the drain timeout
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(cfg.StopTimeout + StopSlack + 5*time.Second):
		t.Fatal("Stop did not return")
	}
	took := time.Since(start)
	if took < cfg.StopTimeout {
		t.Errorf("Stop took %s: the slow run did not get the drain timeout of %s", took, cfg.StopTimeout)
	}
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run = %v", err)
	}

	if r := live.final("quick"); r.Result != protocol.ResultSuccess {
		t.Errorf("the run that ended within the drain: %+v", r)
	}
	r := live.final("slow")
	if r.Result != protocol.ResultKilled || !strings.Contains(r.Output, "drain timeout (2s)") {
		t.Errorf("the run still going after the drain: result %q, output %q", r.Result, r.Output)
	}
	if r := live.final("late"); r.Result != "" {
		t.Errorf("a run-once sent while draining ran: %+v", r)
	}
	// It fires every second: the drain lasted over two. A fire due just as
	// the drain began may still arrive a moment later.
	if last := time.Unix(0, lastTick.Load()); last.After(start.Add(500 * time.Millisecond)) {
		t.Errorf("the scheduled task fired %s into the drain", last.Sub(start))
	}
	live.mu.Lock()
	offline := live.offline
	live.mu.Unlock()
	if offline != 1 {
		t.Errorf("the reachable master got %d offline calls, want 1", offline)
	}
}

// A worker sends its labels at registration and in every /health answer.
func TestLabelsSentAtRegistrationAndHealth(t *testing.T) {
	t.Parallel()
	m := newDrainMaster(t)
	cfg := lifeConfig(t.TempDir(), m.srv.URL)
	cfg.AutoRegister = true
	labels := protocol.Labels{"pool": "billing", "zone": "eu-1"}
	cfg.Labels = labels
	w, err := New(cfg, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	labels["pool"] = "changed after New" // the worker keeps its own copy
	done := runAsync(context.Background(), w)
	waitReady(t, w)
	m.mu.Lock()
	regs := append([]protocol.RegisterRequest(nil), m.regs...)
	m.mu.Unlock()
	if len(regs) != 1 || regs[0].Labels.String() != "pool=billing,zone=eu-1" {
		t.Errorf("registrations: %+v", regs)
	}
	if got := w.Health().Labels.String(); got != "pool=billing,zone=eu-1" {
		t.Errorf("health labels %q", got)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, done); err != nil {
		t.Errorf("Run = %v", err)
	}

	// Without labels, none is sent.
	cfg.Labels = nil
	cfg.DataDir = t.TempDir()
	w2, err := New(cfg, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(w2.Health())
	if strings.Contains(string(body), "labels") {
		t.Errorf("health without labels: %s", body)
	}
	_ = w2.Stop(context.Background())

	cfg.Labels = protocol.Labels{"zone": "eu 1"}
	if _, err := New(cfg, testutil.Discard()); err == nil || !strings.Contains(err.Error(), `label "zone=eu 1": value must be`) {
		t.Errorf("New with a bad label: %v", err)
	}
}
