package master_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// callbackSink is a loopback HTTP target of delayed tasks: it records every
// call by path and answers per path (/fail: 500).
type callbackSink struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string][]sinkCall
}

type sinkCall struct {
	at      time.Time
	body    string
	ctype   string
	headers http.Header
}

func newCallbackSink(t *testing.T) *callbackSink {
	s := &callbackSink{calls: map[string][]sinkCall{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls[r.URL.Path] = append(s.calls[r.URL.Path], sinkCall{at: time.Now(), body: string(b), ctype: r.Header.Get("Content-Type"), headers: r.Header.Clone()})
		s.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/fail") {
			http.Error(w, "callee down", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *callbackSink) got(path string) []sinkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkCall(nil), s.calls[path]...)
}

func (s *callbackSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += len(c)
	}
	return n
}

// fastDelayed makes the delayed loop quick enough for tests.
func fastDelayed(c *master.Config) {
	c.Delayed = master.DelayedConfig{Poll: 200 * time.Millisecond, Timeout: 2 * time.Second, ReportGrace: 500 * time.Millisecond,
		LostAfter: 20 * time.Second, Backoff: 100 * time.Millisecond, BackoffMax: time.Second, LateAfter: 2 * time.Second,
		Resend: 100 * time.Millisecond}
}

// switchHandler serves whichever master router is current, so that workers
// keep one master URL across a master restart.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.h.Load()
	if h == nil {
		writeErr(w, errors.New("no master"))
		return
	}
	(*h).ServeHTTP(w, r)
}

func (s *switchHandler) set(t *testing.T, ctx context.Context, st *store.Store, m *master.Master) {
	t.Helper()
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: storetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.h.Store(&h)
}

// reportingWorkers starts in-process workers that report their runs to
// masterURL, connected and enabled.
func reportingWorkers(e *env, masterURL string, names ...string) map[string]*testWorker {
	out := map[string]*testWorker{}
	for _, n := range names {
		tw := startWorker(e.t, n, func(c *worker.Config) { c.MasterURL = masterURL })
		e.create(tw)
		e.connect(n)
		e.enable(n)
		out[n] = tw
	}
	return out
}

func delayedIn(url string, delay string) master.DelayedInput {
	return master.DelayedInput{SourceApp: "shop", Topic: "order.timeout", ContentKey: "order-42", Delay: json.RawMessage(`"` + delay + `"`),
		NotifyURL: url, NotifyBody: `{"order":42}`, ContentType: "application/json"}
}

// waitDelayed polls until the task's status is want and returns it.
func waitDelayed(t *testing.T, m *master.Master, id, want string, within time.Duration) *master.Delayed {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		d, err := m.Delayed().GetDelayed(context.Background(), id)
		if err == nil && d.Status == want {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("delayed task %s not %s after %s: %+v %v", id, want, within, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func delayedRunsOf(t *testing.T, m *master.Master, id string) []store.Run {
	t.Helper()
	runs, _, err := m.Delayed().DelayedRuns(context.Background(), id, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// A delayed task fires once at its time on a running worker (never on a
// disabled one), posts its body with its content type and headers, and its
// run is recorded with the task's id; creating it again while it is pending
// answers the same task.
func TestDelayedFiresOnceOnARunningWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, fastDelayed)
		url := e.serveMaster()
		reportingWorkers(e, url, "w1", "w2")
		if _, err := e.m.Nodes().Disable(e.ctx, "w2"); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		sink := newCallbackSink(t)
		in := delayedIn(sink.URL+"/cb", "700ms")
		d, created, err := e.m.Delayed().CreateDelayed(e.ctx, in, "admin")
		if err != nil || !created || d.Status != store.DelayedPending {
			t.Fatalf("create: %+v %v %v", d, created, err)
		}
		again, created, err := e.m.Delayed().CreateDelayed(e.ctx, in, "admin")
		if err != nil || created || again.ID != d.ID {
			t.Fatalf("create again while pending: %+v %v %v; want the same task", again, created, err)
		}
		done := waitDelayed(t, e.m, d.ID, store.DelayedSuccess, 20*time.Second)
		calls := sink.got("/cb")
		if len(calls) != 1 {
			t.Fatalf("callback called %d times, want once", len(calls))
		}
		c := calls[0]
		if c.at.Before(d.DueAt) {
			t.Errorf("fired at %s, before its due time %s", c.at, d.DueAt)
		}
		if c.body != `{"order":42}` || c.ctype != "application/json" || c.headers.Get("X-SM-Delayed-Id") != d.ID ||
			c.headers.Get("X-SM-Content-Key") != "order-42" || c.headers.Get("X-SM-Attempt") != "1" {
			t.Errorf("callback: body %q, type %q, headers %v", c.body, c.ctype, c.headers)
		}
		runs := delayedRunsOf(t, e.m, d.ID)
		if len(runs) != 1 || runs[0].Node != "w1" || runs[0].Result != protocol.ResultSuccess || runs[0].Attempt != 1 ||
			runs[0].DelayedID != d.ID || runs[0].TaskID != d.ID || runs[0].HTTPStatus != 200 {
			t.Fatalf("runs %+v", runs)
		}
		if r, err := e.m.Runs().Get(e.ctx, runs[0].ID); err != nil || r.DelayedID != d.ID {
			t.Fatalf("the run by its id: %+v %v", r, err)
		}
		if done.Attempts != 1 || done.Late || done.FinishedAt == nil || done.Node != "w1" {
			t.Fatalf("done: %+v", done)
		}
		// Finished, the same key makes a new task.
		in.Delay = json.RawMessage(`"1h"`)
		third, created, err := e.m.Delayed().CreateDelayed(e.ctx, in, "admin")
		if err != nil || !created || third.ID == d.ID {
			t.Fatalf("create after success: %+v %v %v", third, created, err)
		}
		if _, err := e.m.Delayed().CancelDelayed(e.ctx, third.ID); err != nil {
			t.Fatal(err)
		}
		evs, _, _ := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "delayed.create", Target: d.ID})
		if len(evs) != 1 {
			t.Errorf("create events of %s: %d, want 1 (the idempotent create changes nothing)", d.ID, len(evs))
		}
	})
}

// A failing callback is retried with growing backoff, then the task fails
// and the webhook is told; every attempt is a run.
func TestDelayedRetriesWithBackoffThenFailsAndNotifies(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, fastDelayed)
		url := e.serveMaster()
		reportingWorkers(e, url, "w1")
		var hook atomic.Pointer[map[string]any]
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			hook.Store(&body)
		}))
		defer recv.Close()
		set, _ := e.m.Settings()
		set.WebhookURL, set.PublicURL = recv.URL, "http://console.example"
		if err := e.m.UpdateSettings(e.ctx, set); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		sink := newCallbackSink(t)
		in := delayedIn(sink.URL+"/fail", "100ms")
		in.Retries = 2
		d, _, err := e.m.Delayed().CreateDelayed(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		failed := waitDelayed(t, e.m, d.ID, store.DelayedFailed, 30*time.Second)
		if failed.Attempts != 3 || !strings.Contains(failed.LastError, "HTTP 500") {
			t.Fatalf("failed task: %+v", failed)
		}
		calls := sink.got("/fail")
		if len(calls) != 3 {
			t.Fatalf("callback called %d times, want 3 (1 + 2 retries)", len(calls))
		}
		// Backoff 100ms, then 200ms: each retry waits at least that long.
		for i, min := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
			if gap := calls[i+1].at.Sub(calls[i].at); gap < min {
				t.Errorf("retry %d came %s after the failure, want at least %s", i+1, gap, min)
			}
			if got := calls[i+1].headers.Get("X-SM-Attempt"); got != fmt.Sprint(i+2) {
				t.Errorf("retry %d says attempt %q", i+1, got)
			}
		}
		runs := delayedRunsOf(t, e.m, d.ID)
		if len(runs) != 3 {
			t.Fatalf("%d runs, want 3", len(runs))
		}
		for i, r := range runs { // newest first
			if r.Attempt != 3-i || r.Result != protocol.ResultFailed {
				t.Errorf("run %d: attempt %d result %s", i, r.Attempt, r.Result)
			}
		}
		storetest.Eventually(t, 10*time.Second, func() bool { return hook.Load() != nil }, "no webhook after the final failure")
		body := *hook.Load()
		dl, _ := body["delayed"].(map[string]any)
		if body["event"] != "delayed.failed" || dl["id"] != d.ID || body["link"] != "http://console.example/delayed/"+d.ID {
			t.Fatalf("webhook body %v", body)
		}
		evs, _, _ := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "delayed.fail", Target: d.ID})
		if len(evs) != 1 {
			t.Fatalf("delayed.fail events: %d", len(evs))
		}
	})
}

// Cancel takes only a pending task, and says why otherwise.
func TestDelayedCancel(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, fastDelayed)
		d, _, err := e.m.Delayed().CreateDelayed(e.ctx, delayedIn("http://127.0.0.1:1/cb", "1h"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.m.Delayed().CancelDelayed(e.ctx, d.ID)
		if err != nil || got.Status != store.DelayedCancelled || got.FinishedAt == nil {
			t.Fatalf("cancel: %+v %v", got, err)
		}
		if _, err := e.m.Delayed().CancelDelayed(e.ctx, d.ID); !errors.Is(err, master.ErrState) || !strings.Contains(master.Message(err), "cancelled already") {
			t.Fatalf("cancel twice: %v", err)
		}
		if _, err := e.m.Delayed().CancelDelayed(e.ctx, "00000000000000000000000000000000"); !errors.Is(err, master.ErrNotFound) {
			t.Fatalf("cancel a missing task: %v", err)
		}
	})
}

// acceptOnly answers the worker API's run-once with 202 without running
// anything (a worker that dies right after taking a task) and everything
// else with the real worker router.
func acceptOnly(real http.Handler, took *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == protocol.PathTaskRunOnce {
			took.Add(1)
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, `{"id":"x","status":"started"}`)
			return
		}
		real.ServeHTTP(w, r)
	})
}

// A task sent to a worker that dies before reporting goes, once that worker
// is offline and the report deadline passed, to another running worker: the
// callback is made once, by the second one, and the first sending is
// recorded as lost.
func TestDelayedReassignedWhenTheWorkerDies(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, fastDelayed, func(c *master.Config) {
			c.Health = master.HealthConfig{Interval: 200 * time.Millisecond, Timeout: 150 * time.Millisecond, MaxFailures: 2}
			c.Pinned = master.Pinned{HealthInterval: true, HealthTimeout: true, MaxFailures: true}
		})
		url := e.serveMaster()
		ws := reportingWorkers(e, url, "w1", "w2")
		var took atomic.Int32
		ws["w1"].Serve(acceptOnly(ws["w1"].Router(), &took))
		if _, err := e.m.Nodes().Disable(e.ctx, "w2"); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		sink := newCallbackSink(t)
		d, _, err := e.m.Delayed().CreateDelayed(e.ctx, delayedIn(sink.URL+"/cb", "100ms"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		running := waitDelayed(t, e.m, d.ID, store.DelayedRunning, 20*time.Second)
		storetest.Eventually(t, 10*time.Second, func() bool { return took.Load() >= 1 }, "w1 was not sent the task")
		if running.Node != "w1" || took.Load() != 1 {
			t.Fatalf("sent to %q (%d taken), want w1", running.Node, took.Load())
		}
		if _, err := e.m.Nodes().Enable(e.ctx, "w2"); err != nil {
			t.Fatal(err)
		}
		ws["w1"].Srv.Close() // w1 dies
		done := waitDelayed(t, e.m, d.ID, store.DelayedSuccess, 30*time.Second)
		if n := len(sink.got("/cb")); n != 1 {
			t.Fatalf("callback called %d times, want once", n)
		}
		runs := delayedRunsOf(t, e.m, d.ID)
		if len(runs) != 1 || runs[0].Node != "w2" || runs[0].Attempt != 1 {
			t.Fatalf("runs %+v, want one by w2, attempt 1 (a lost sending costs no attempt)", runs)
		}
		if done.Node != "w2" || done.Attempts != 1 {
			t.Fatalf("done %+v", done)
		}
		ds, _ := store.ListDispatches(e.ctx, e.s.Store.DB, d.ID)
		if len(ds) != 2 || ds[0].Node != "w1" || ds[0].Outcome != "lost" || ds[1].Node != "w2" || ds[1].Outcome != "success" {
			t.Fatalf("sendings %+v", ds)
		}
		evs, _, _ := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "delayed.reassign", Target: d.ID})
		if len(evs) != 1 || !strings.Contains(evs[0].Detail, "w1") {
			t.Fatalf("reassign events %+v", evs)
		}
	})
}

// A task due while no master ran fires as soon as a master is back, once,
// marked late by how much.
func TestDelayedLateAfterAMasterOutage(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		var sw switchHandler
		srv := httptest.NewServer(&sw)
		defer srv.Close()
		first := newMaster(t, s, fastDelayed)
		sw.set(t, ctx, s.Store, first)
		e := &env{t: t, ctx: ctx, s: s, m: first}
		reportingWorkers(e, srv.URL, "w1")
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		sink := newCallbackSink(t)
		d, _, err := first.Delayed().CreateDelayed(ctx, delayedIn(sink.URL+"/cb", "1s"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		first.Stop(ctx) // the outage, before the due time
		storetest.Eventually(t, 20*time.Second, func() bool { return time.Since(d.DueAt) > 3*time.Second }, "time does not pass")
		if n := sink.total(); n != 0 {
			t.Fatalf("fired %d times with no master up", n)
		}
		second := newMaster(t, s, fastDelayed)
		sw.set(t, ctx, s.Store, second)
		if err := second.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := waitDelayed(t, second, d.ID, store.DelayedSuccess, 30*time.Second)
		if !done.Late || done.LateDuration() < 3*time.Second || done.LateBy == "" {
			t.Fatalf("after the outage: late %v by %q (%s); want late by more than 3s", done.Late, done.LateBy, done.LateDuration())
		}
		if n := len(sink.got("/cb")); n != 1 {
			t.Fatalf("callback called %d times, want once", n)
		}
	})
}

// Two masters on one MariaDB (or PostgreSQL), each creating tasks, with the
// leader stopped half way: every task fires exactly once.
func TestDelayedTwoMastersFireEachOnce(t *testing.T) {
	t.Parallel()
	storetest.RunServers(t, testDelayedTwoMastersFireEachOnce)
}

func testDelayedTwoMastersFireEachOnce(t *testing.T, s storetest.NamedStore) {
	ctx := storetest.Ctx(t)
	const interval = 200 * time.Millisecond
	var ms []*master.Master
	var urls []string
	for _, name := range []string{"m1", "m2"} {
		m := newMaster(t, s, fastDelayed, func(c *master.Config) {
			c.Identity = name
			c.Health.Interval, c.Health.Timeout = interval, interval/2
			c.Pinned = master.Pinned{HealthInterval: true, HealthTimeout: true}
		})
		var sw switchHandler
		sw.set(t, ctx, s.Store, m)
		srv := httptest.NewServer(&sw)
		t.Cleanup(srv.Close)
		ms, urls = append(ms, m), append(urls, srv.URL)
	}
	e := &env{t: t, ctx: ctx, s: s, m: ms[0]}
	reportingWorkers(e, strings.Join(urls, ","), "w1", "w2")
	for _, m := range ms {
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lead := waitOneLeader(t, ms, 10*time.Second)
	sink := newCallbackSink(t)
	const n = 60
	ids := make([]string, n)
	for i := range n {
		in := delayedIn(fmt.Sprintf("%s/cb/%d", sink.URL, i), fmt.Sprintf("%dms", 300+i*40))
		in.ContentKey = fmt.Sprint(i)
		d, created, err := ms[i%2].Delayed().CreateDelayed(ctx, in, "admin")
		if err != nil || !created {
			t.Fatalf("create %d: %v %v", i, created, err)
		}
		ids[i] = d.ID
	}
	// Half way through, the leader stops; the other takes over.
	storetest.Eventually(t, 20*time.Second, func() bool { return sink.total() >= n/3 }, "a third of the tasks did not fire")
	lead.Stop(ctx)
	if fired := sink.total(); fired >= n {
		t.Fatalf("all %d tasks fired before the leader stopped: the takeover was not exercised", fired)
	}
	for i, id := range ids {
		var other *master.Master
		for _, m := range ms {
			if m != lead {
				other = m
			}
		}
		waitDelayed(t, other, id, store.DelayedSuccess, 60*time.Second)
		if got := len(sink.got(fmt.Sprintf("/cb/%d", i))); got != 1 {
			t.Errorf("task %d called back %d times, want once", i, got)
		}
		if runs := delayedRunsOf(t, other, id); len(runs) != 1 {
			t.Errorf("task %d has %d runs, want 1", i, len(runs))
		}
	}
	if got := sink.total(); got != n {
		t.Fatalf("%d callbacks in all, want %d", got, n)
	}
}

// A task due while no worker runs waits, saying why, and is sent as soon as
// one runs, marked late; executors that are not running hold it back the
// same way although another worker runs.
func TestDelayedWaitsForARunningWorker(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, fastDelayed)
		url := e.serveMaster()
		reportingWorkers(e, url, "w1", "w2")
		if _, err := e.m.Nodes().Disable(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		sink := newCallbackSink(t)
		in := delayedIn(sink.URL+"/cb", "100ms")
		in.Executors = []string{"w1"}
		d, _, err := e.m.Delayed().CreateDelayed(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		storetest.Eventually(t, 10*time.Second, func() bool {
			got, err := e.m.Delayed().GetDelayed(e.ctx, d.ID)
			return err == nil && got.Status == store.DelayedPending && strings.Contains(got.LastError, "none of its executors (w1) is running")
		}, "the task does not say why it waits")
		storetest.Eventually(t, 10*time.Second, func() bool { return time.Since(d.DueAt) > 2500*time.Millisecond }, "time does not pass")
		if n := sink.total(); n != 0 {
			t.Fatalf("sent %d times with its executor disabled (w2 runs but is not one)", n)
		}
		if _, err := e.m.Nodes().Enable(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		done := waitDelayed(t, e.m, d.ID, store.DelayedSuccess, 20*time.Second)
		if !done.Late || done.Node != "w1" || len(sink.got("/cb")) != 1 {
			t.Fatalf("after the executor came back: %+v, %d calls", done, sink.total())
		}
	})
}
