package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// earlierRegisterRequest is a registration body as a master of an earlier
// version reads it: without Parts.
type earlierRegisterRequest struct {
	Node        protocol.NodeConfig `json:"node"`
	MachineName string              `json:"machine_name"`
	Secret      string              `json:"secret"`
	BootID      string              `json:"boot_id"`
	NodeKey     string              `json:"node_key"`
	Labels      protocol.Labels     `json:"labels,omitempty"`
}

// pagesMaster answers registrations and pages of tasks as a master does,
// over a fixed list of tasks in key order (so every page it gives is what
// a master read before any operation of the test). Hooks run before an
// answer is written.
type pagesMaster struct {
	t       *testing.T
	tasks   []protocol.TaskSpec
	earlier bool // a master of an earlier version: no parts

	mu            sync.Mutex
	secret        string
	registrations []bool // Parts of each registration
	pages         int    // pages answered
	failPages     int    // page requests still to answer 503

	onRegister func()
	onPage     func(n int)
}

func newPagesMaster(t *testing.T, n int) *pagesMaster {
	pm := &pagesMaster{t: t}
	for i := range n {
		pm.tasks = append(pm.tasks, httpSpec(fmt.Sprintf("t%04d", i), "http://127.0.0.1:1",
			protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}))
	}
	return pm
}

// after is the page of at most limit tasks after the cursor.
func (pm *pagesMaster) after(cursor string, limit int) (page []protocol.TaskSpec, next string, more bool) {
	for _, s := range pm.tasks {
		if s.ID > cursor {
			if len(page) == limit {
				return page, page[len(page)-1].ID, true
			}
			page = append(page, s)
		}
	}
	return page, "", false
}

func (pm *pagesMaster) serve() string {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fail := func(code int, msg string) {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(code)
			_ = json.NewEncoder(rw).Encode(protocol.ErrorResponse{Error: msg})
		}
		switch r.URL.Path {
		case protocol.PathMasterRegister:
			var req protocol.RegisterRequest
			if pm.earlier {
				var old earlierRegisterRequest
				if err := protocol.DecodeStrict(body, &old); err != nil {
					fail(http.StatusBadRequest, "registration body: "+err.Error())
					return
				}
			}
			if err := protocol.DecodeStrict(body, &req); err != nil {
				fail(http.StatusBadRequest, err.Error())
				return
			}
			pm.mu.Lock()
			pm.secret = req.Secret
			pm.registrations = append(pm.registrations, req.Parts)
			hook := pm.onRegister
			pm.mu.Unlock()
			resp := protocol.RegisterResponse{Master: "m", Tasks: pm.tasks}
			if req.Parts {
				resp.Tasks, resp.After, resp.More = pm.after("", protocol.MaxTaskBatch)
			}
			if hook != nil {
				hook()
			}
			_ = json.NewEncoder(rw).Encode(resp)
		case protocol.PathMasterTasks:
			pm.mu.Lock()
			ok := pm.secret != "" && r.Header.Get(protocol.HeaderSecret) == pm.secret && r.Header.Get(protocol.HeaderNode) == "w1"
			failing := pm.failPages > 0
			if failing {
				pm.failPages--
			}
			pm.mu.Unlock()
			var req protocol.TasksPageRequest
			switch {
			case !ok:
				fail(http.StatusUnauthorized, "unknown node or wrong secret")
				return
			case protocol.DecodeStrict(body, &req) != nil || req.Limit < 1 || req.Limit > protocol.MaxTaskBatch:
				fail(http.StatusBadRequest, "bad page request")
				return
			case failing:
				fail(http.StatusServiceUnavailable, "database unavailable")
				return
			}
			var resp protocol.TasksPageResponse
			resp.Tasks, resp.After, resp.More = pm.after(req.After, req.Limit)
			pm.mu.Lock()
			pm.pages++
			n, hook := pm.pages, pm.onPage
			pm.mu.Unlock()
			if hook != nil {
				hook(n)
			}
			_ = json.NewEncoder(rw).Encode(resp)
		default:
			_, _ = rw.Write([]byte("{}"))
		}
	}))
	pm.t.Cleanup(srv.Close)
	return srv.URL
}

func (pm *pagesMaster) counts() (registrations []bool, pages int) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return append([]bool(nil), pm.registrations...), pm.pages
}

// registeredWorker runs an auto worker against url until the test ends and
// waits until it is ready (registered, its tasks all taken); before sees
// the worker before it runs.
func registeredWorker(t *testing.T, url string, before func(*Worker)) *Worker {
	t.Helper()
	cfg := lifeConfig(t.TempDir(), url)
	cfg.AutoRegister = true
	w, err := New(cfg, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(w)
	}
	runAsync(context.Background(), w)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	select {
	case <-w.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the worker was not ready within 30s")
	}
	return w
}

// paused reports whether w schedules task id paused.
func paused(w *Worker, id string) bool {
	w.runner.mu.Lock()
	defer w.runner.mu.Unlock()
	tj, ok := w.runner.jobs[id]
	return ok && tj.paused.Load()
}

func scheduled(w *Worker, id string) bool {
	_, ok := w.runner.get(id)
	return ok
}

// A worker with 2,500 tasks takes the first 1,000 from its registration
// answer and fetches the others a page at a time (a page that fails is
// tried again). Every part is a page read before the operations of the
// test: a task stopped while the registration was in flight or while the
// pages came is not started again, a task started meanwhile is not dropped
// by the last part, a pause of a task that had not come yet holds.
func TestRegistrationTakesItsTasksInPages(t *testing.T) {
	t.Parallel()
	pm := newPagesMaster(t, 2500)
	pm.failPages = 1
	url := pm.serve()
	var w *Worker
	var hookErr atomic.Value
	pm.onRegister = func() { w.StopTask("t0001") }
	pm.onPage = func(n int) {
		if n != 1 {
			return
		}
		w.StopTask("t1500") // in this page
		for _, err := range []error{
			w.PauseTask("t1600"), // in this page: not here yet
			w.PauseTask("t0005"), // here
			w.StartTask(httpSpec("a-new", "http://127.0.0.1:1", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)})),
		} {
			if err != nil {
				hookErr.Store(err)
			}
		}
	}
	registeredWorker(t, url, func(nw *Worker) { w = nw })
	if err := hookErr.Load(); err != nil {
		t.Fatalf("an operation while the pages came: %v", err)
	}
	regs, pages := pm.counts()
	if len(regs) != 1 || !regs[0] || pages != 2 {
		t.Fatalf("registrations %v, pages %d; want one registration with parts and 2 pages after it", regs, pages)
	}
	if n := w.runner.count(); n != 2500-2+1 {
		t.Errorf("%d tasks scheduled, want 2,499", n)
	}
	for _, id := range []string{"t0001", "t1500"} {
		if scheduled(w, id) {
			t.Errorf("task %s, stopped while its part was on its way, is scheduled", id)
		}
	}
	if !scheduled(w, "a-new") || !scheduled(w, "t2499") || !scheduled(w, "t0000") {
		t.Error("a task started midway, the last or the first task is not scheduled")
	}
	if !paused(w, "t1600") || !paused(w, "t0005") || paused(w, "t1601") {
		t.Error("a pause while the pages came did not hold, or paused another task")
	}
	w.partMu.Lock()
	left := w.part
	w.partMu.Unlock()
	if left != nil {
		t.Error("the session outlived its last page")
	}
	// Once the schedule is complete, a pause of a task not here is refused.
	if err := w.PauseTask("ghost"); err == nil {
		t.Error("a pause of an unknown task succeeded after the session")
	}
}

// A master's push or a Shutdown that comes while the pages (or the
// registration answer) are on their way decides the schedule: nothing of
// the registration is applied after it, and the pages stop.
func TestRegistrationPagesYieldToAPushOrShutdown(t *testing.T) {
	t.Parallel()
	every := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}
	for _, c := range []struct {
		name      string
		atPage    bool // else while the registration is in flight
		push      bool // else Shutdown
		want      int
		wantPages int
	}{
		{"push during the pages", true, true, 2, 1},
		{"shutdown during the pages", true, false, 0, 1},
		{"shutdown during the registration", false, false, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pm := newPagesMaster(t, 2500)
			url := pm.serve()
			var w *Worker
			var hookErr atomic.Value
			act := func() {
				var err error
				if c.push {
					err = w.StartupPart(context.Background(), protocol.StartupPartRequest{Session: "push", First: true, Last: true,
						Tasks: []protocol.TaskSpec{httpSpec("p1", "http://127.0.0.1:1", every), httpSpec("p2", "http://127.0.0.1:1", every)}})
				} else {
					err = w.Shutdown(context.Background())
				}
				if err != nil {
					hookErr.Store(err)
				}
			}
			if c.atPage {
				pm.onPage = func(n int) {
					if n == 1 {
						act()
					}
				}
			} else {
				pm.onRegister = act
			}
			registeredWorker(t, url, func(nw *Worker) { w = nw })
			if err := hookErr.Load(); err != nil {
				t.Fatal(err)
			}
			// The page after the one on its way may have been asked for
			// already (the next page is fetched while one is scheduled).
			_, pages := pm.counts()
			if n := w.runner.count(); n != c.want || pages < c.wantPages || pages > c.wantPages+1 {
				t.Fatalf("%d tasks scheduled after %d pages, want %d after %d", n, pages, c.want, c.wantPages)
			}
			if !c.push && w.isScheduling() {
				t.Error("the worker schedules after a Shutdown")
			}
		})
	}
}

// With a master of an earlier version (it refuses the capability as an
// unknown field) the worker registers again without it and takes every
// task from the one answer.
func TestRegistrationWithAnEarlierMaster(t *testing.T) {
	t.Parallel()
	pm := newPagesMaster(t, 2500)
	pm.earlier = true
	w := registeredWorker(t, pm.serve(), nil)
	regs, pages := pm.counts()
	if len(regs) != 1 || regs[0] || pages != 0 {
		t.Fatalf("registrations accepted %v, pages %d; want one without parts, no page", regs, pages)
	}
	if n := w.runner.count(); n != 2500 {
		t.Fatalf("%d tasks scheduled, want 2500", n)
	}
}
