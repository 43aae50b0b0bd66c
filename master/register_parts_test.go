package master_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// hasTask reports whether w schedules task id (a pause of a task it does not
// have is refused once no schedule is arriving).
func hasTask(tw *testWorker, id string) bool {
	if err := tw.W.PauseTask(id); err != nil {
		return false
	}
	_ = tw.W.ResumeTask(id)
	return true
}

// TestWorkerRegistrationTakesItsTasksInParts: a worker with 2,500 tasks
// that restarts gets the first 1,000 in its registration answer and fetches
// the rest a page at a time; tasks stopped and started while the pages are
// on their way (the page read before the operations, delivered after) are
// neither resurrected nor dropped. Against a master of an earlier version
// (which refuses the capability) it registers again and takes every task
// in one answer.
func TestWorkerRegistrationTakesItsTasksInParts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		api := e.masterAPI()
		var pages, registrations atomic.Int32
		var old atomic.Bool // answer as a master of an earlier version
		var midway atomic.Pointer[func(http.ResponseWriter, *http.Request)]
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case protocol.PathMasterTasks:
				if n := pages.Add(1); n == 1 {
					if h := midway.Swap(nil); h != nil {
						(*h)(rw, r)
						return
					}
				}
			case protocol.PathMasterRegister:
				registrations.Add(1)
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if old.Load() && bytes.Contains(body, []byte(`"parts"`)) {
					// What an earlier master's strict decoding answers.
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusBadRequest)
					_, _ = rw.Write([]byte(`{"error":"registration body: json: unknown field \"parts\""}`))
					return
				}
			}
			api.ServeHTTP(rw, r)
		}))
		t.Cleanup(srv.Close)
		tw := startWorker(t, "reg", autoCfg(srv.URL))
		runWorker(t, tw.W)
		inputs := make([]master.TaskInput, 2520)
		for i := range inputs {
			inputs[i] = httpInput("reg")
			inputs[i].Title = fmt.Sprint("t", i)
		}
		var stopped []string // 2,500 running, 20 stopped
		for i, start := range []bool{true, false} {
			results, err := e.m.Tasks().Save(e.ctx, inputs[i*2500:min(len(inputs), (i+1)*2500)], start, "admin")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range results {
				if !r.OK {
					t.Fatalf("%+v", r)
				}
				if !start {
					stopped = append(stopped, r.ID)
				}
			}
		}
		if n := tw.W.Health().RunningTasks; n != 2500 {
			t.Fatalf("the worker schedules %d tasks, want 2500", n)
		}

		// While the first page after the answer is on its way: it is read
		// first, then two of its tasks are stopped and a stopped task whose
		// key the pages have passed is started, then the page (stale) is
		// delivered.
		var gone []string
		var started string
		h := func(rw http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, r)
			var page protocol.TasksPageResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || len(page.Tasks) < 900 || !page.More {
				t.Errorf("first page: %d, %d tasks, more %v, %v", rec.Code, len(page.Tasks), page.More, err)
			} else {
				gone = []string{page.Tasks[10].ID, page.Tasks[len(page.Tasks)-10].ID}
				for _, id := range gone {
					if _, err := e.m.Tasks().Stop(e.ctx, id); err != nil {
						t.Errorf("stop %s midway: %v", id, err)
					}
				}
				for _, id := range stopped {
					if id < page.After && (started == "" || id < started) {
						started = id
					}
				}
				if _, err := e.m.Tasks().Start(e.ctx, started); err != nil {
					t.Errorf("start %q midway: %v", started, err)
				}
			}
			for k, v := range rec.Header() {
				rw.Header()[k] = v
			}
			rw.WriteHeader(rec.Code)
			_, _ = rw.Write(rec.Body.Bytes())
		}
		midway.Store(&h)

		// The worker restarts.
		stop := func() {
			// Each stop has its own deadline: one shared with the steps
			// between them ran out on a loaded machine.
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			if err := tw.W.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		registrations.Store(0)
		runWorker(t, tw.Replace())
		if p := pages.Load(); p != 2 {
			t.Fatalf("%d pages fetched after the registration answer, want 2 (3 parts of at most 1,000)", p)
		}
		if t.Failed() {
			return
		}
		if n := tw.W.Health().RunningTasks; n != 2500-2+1 {
			t.Errorf("the worker schedules %d tasks after its registration, want 2,499 (2 stopped, 1 started midway)", n)
		}
		for _, id := range gone {
			if hasTask(tw, id) {
				t.Errorf("task %s, stopped while the pages came, was started again by a page read before", id)
			}
		}
		if !hasTask(tw, started) {
			t.Errorf("task %s, started while the pages came, was dropped by the last page", started)
		}
		if r := registrations.Load(); r != 1 {
			t.Errorf("%d registrations, want 1", r)
		}

		// A master of an earlier version: the capability is refused, the
		// worker registers again without it and takes every task at once.
		old.Store(true)
		pages.Store(0)
		registrations.Store(0)
		stop()
		runWorker(t, tw.Replace())
		if n, p, r := tw.W.Health().RunningTasks, pages.Load(), registrations.Load(); n != 2499 || p != 0 || r != 2 {
			t.Fatalf("with an earlier master: %d tasks, %d pages, %d registrations; want 2,499 in one answer after 2 registrations", n, p, r)
		}
	})
}

// TestRegistrationAnswerWithoutCapability: a worker that does not say it
// takes parts (an earlier version) gets every task in its registration
// answer; one that says so gets the first page and fetches the others by
// cursor. A page is refused for a bad cursor or limit and to a node that
// is not running.
func TestRegistrationAnswerWithoutCapability(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		register := func(parts bool) protocol.RegisterResponse {
			t.Helper()
			h, body := signedRegistrationWith(t, clusterKey, key, protocol.RegisterRequest{
				Node:   protocol.NodeConfig{Name: "legacy", Protocol: "http", Host: "127.0.0.1:30001", Priority: 1, MaxConcurrency: 5},
				Secret: protocol.NewSecret(), BootID: "b1", MachineName: "box", Parts: parts,
			}, time.Now())
			resp, err := e.m.Register(e.ctx, h, body)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		register(false)
		inputs := make([]master.TaskInput, 2500)
		for i := range inputs {
			inputs[i] = httpInput("legacy")
			inputs[i].Title = fmt.Sprint("t", i)
		}
		results, err := e.m.Tasks().Save(e.ctx, inputs, false, "admin")
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(results))
		for i, r := range results {
			ids[i] = r.ID
		}
		// Running, as if started while the node's process was away.
		if done, err := store.SetTasksStatus(e.ctx, s.Store.DB, ids, []store.TaskStatus{store.TaskStopped}, store.TaskRunning); err != nil || len(done) != len(ids) {
			t.Fatalf("%d tasks set running: %v", len(done), err)
		}
		slices.Sort(ids)

		resp := register(false)
		if len(resp.Tasks) != 2500 || resp.More || resp.After != "" {
			t.Fatalf("without the capability: %d tasks, more %v, after %q; want all 2,500 in one answer", len(resp.Tasks), resp.More, resp.After)
		}
		resp = register(true)
		if len(resp.Tasks) != 1000 || !resp.More || resp.After != ids[999] {
			t.Fatalf("with the capability: %d tasks, more %v, after %q; want the first 1,000 and a cursor", len(resp.Tasks), resp.More, resp.After)
		}
		n := e.node("legacy")
		got := []string{}
		for _, sp := range resp.Tasks {
			got = append(got, sp.ID)
		}
		for after, more := resp.After, resp.More; more; {
			page, err := e.m.Tasks().Page(e.ctx, n, protocol.TasksPageRequest{After: after, Limit: 700})
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range page.Tasks {
				got = append(got, sp.ID)
			}
			after, more = page.After, page.More
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("the answer and its pages give %d tasks, want the node's 2,500 each once in key order", len(got))
		}
		for _, req := range []protocol.TasksPageRequest{{Limit: -1}, {Limit: protocol.MaxTaskBatch + 1}, {After: strings.Repeat("x", protocol.MaxCursorLen+1)}} {
			if _, err := e.m.Tasks().Page(e.ctx, n, req); master.KindOf(err) != master.KindInvalid {
				t.Errorf("page %+v: %v, want invalid", req, err)
			}
		}
		reason := "test: seen down"
		if err := store.TransitionNode(e.ctx, s.Store.DB, "legacy", store.Transition{From: []store.NodeStatus{store.StatusRunning},
			To: store.StatusOffline, Reason: &reason}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Page(e.ctx, e.node("legacy"), protocol.TasksPageRequest{}); master.KindOf(err) != master.KindState {
			t.Errorf("a page for an offline node: %v, want a state error", err)
		}
	})
}
