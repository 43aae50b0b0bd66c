package master_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// hitTarget counts the requests it receives, by path.
type hitTarget struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	all  int
}

func newHitTarget(t *testing.T) *hitTarget {
	h := &hitTarget{hits: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.hits[r.URL.Path]++
		h.all++
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hitTarget) count(path string) (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[path], h.all
}

// waitHit polls until path was requested, at most within.
func (h *hitTarget) waitHit(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if n, _ := h.count(path); n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request to %s within %s", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEditRunningTaskSwitchesEveryExecutor: a running HTTP task firing every
// second on three executors is edited twenty times in a row (its URL each
// time, its executors twice) without a stop: each edit reaches the target,
// the task stays running, and every fire ran once: no two runs of one
// scheduled time, every run a success.
func TestEditRunningTaskSwitchesEveryExecutor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	// The master starts first: its re-push on taking the lease, in the
	// background, must not race the task's start below (a push that read
	// the tasks before the start drops it).
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	ws := reportingWorkers(e, url, "w1", "w2", "w3")
	target := newHitTarget(t)
	in := httpInput("w1", "w2", "w3")
	in.Title = "every second"
	in.Schedule = protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second), Align: protocol.AlignEpoch}
	in.HTTP.URL = target.URL + "/v0"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	target.waitHit(t, "/v0", 20*time.Second)
	for i := 1; i <= 20; i++ {
		in.HTTP.URL = fmt.Sprintf("%s/v%d", target.URL, i)
		switch i {
		case 8:
			in.Executors = []string{"w1", "w2"} // w3 leaves
		case 14:
			in.Executors = []string{"w1", "w2", "w3"} // and joins again
		}
		got, err := e.m.Tasks().Update(e.ctx, tk.ID, in)
		if err != nil {
			t.Fatalf("edit %d of the running task: %v", i, err)
		}
		if got.Status != store.TaskRunning || got.HTTP.URL != in.HTTP.URL || got.Version != i+1 {
			t.Fatalf("edit %d: the task is %s with %s, version %d", i, got.Status, got.HTTP.URL, got.Version)
		}
		want := 1
		if i >= 8 && i < 14 {
			want = 0
		}
		if n := ws["w3"].W.Health().RunningTasks; n != want {
			t.Fatalf("after edit %d w3 schedules %d tasks, want %d", i, n, want)
		}
		target.waitHit(t, fmt.Sprintf("/v%d", i), 20*time.Second)
	}
	if _, err := e.m.Tasks().Stop(e.ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	// Every request the target saw is one run, each of its own scheduled time.
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs, _, err := e.m.Runs().List(e.ctx, tk.ID, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, hits := target.count("")
		if len(runs) == hits {
			seen := map[time.Time]string{}
			for _, r := range runs {
				if r.Result != protocol.ResultSuccess {
					t.Errorf("run %s on %s: %s", r.ID, r.Node, r.Result)
				}
				if other, dup := seen[r.ScheduledAt]; dup {
					t.Errorf("the fire of %s ran twice: on %s and %s", r.ScheduledAt, other, r.Node)
				}
				seen[r.ScheduledAt] = r.Node
			}
			t.Logf("%d fires, each run once, across 20 edits", len(runs))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs recorded for %d requests to the target", len(runs), hits)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEditRunningTaskRollsBackWhenAnExecutorFails: when one executor
// refuses the new definition, those that took it go back to the previous
// one, the stored task too, the error names the node, and the task goes on
// firing its previous definition.
func TestEditRunningTaskRollsBackWhenAnExecutorFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	// The master starts first: its re-push on taking the lease, in the
	// background, must not race the task's start below (a push that read
	// the tasks before the start drops it).
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	ws := reportingWorkers(e, url, "w1", "w2", "w3")
	target := newHitTarget(t)
	in := httpInput("w1", "w2", "w3")
	in.Schedule = protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second), Align: protocol.AlignEpoch}
	in.HTTP.URL = target.URL + "/old"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	target.waitHit(t, "/old", 20*time.Second)

	// w3 refuses every call to start a task.
	good := ws["w3"].Router()
	ws["w3"].Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, protocol.PathTaskStart) {
			http.Error(rw, `{"error":"disk full"}`, http.StatusInternalServerError)
			return
		}
		good.ServeHTTP(rw, r)
	}))
	in.HTTP.URL = target.URL + "/new"
	_, err = e.m.Tasks().Update(e.ctx, tk.ID, in)
	if master.KindOf(err) != master.KindWorker || !strings.Contains(err.Error(), "w3") {
		t.Fatalf("edit with a failing executor: %v, want a worker error naming w3", err)
	}
	got, err := e.m.Tasks().Get(e.ctx, tk.ID)
	if err != nil || got.HTTP.URL != target.URL+"/old" || got.Status != store.TaskRunning || got.Version != 1 {
		t.Fatalf("after the failed edit the task is %+v (%v), want the previous definition, running", got, err)
	}
	if vs, err := e.m.Tasks().Versions(e.ctx, tk.ID); err != nil || len(vs) != 1 || !vs[0].Current {
		t.Fatalf("a rolled back edit left a version: %v %+v", err, vs)
	}
	// The executors fire the previous definition again: wait past the
	// switch for two more requests to /old, and none may reach /new.
	before, _ := target.count("/old")
	deadline := time.Now().Add(20 * time.Second)
	for n, _ := target.count("/old"); n < before+2; n, _ = target.count("/old") {
		if time.Now().After(deadline) {
			t.Fatal("the task stopped firing its previous definition after a failed edit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, _ := target.count("/new"); n != 0 {
		t.Fatalf("%d requests reached the new URL of an edit that was rolled back", n)
	}
	// With w3 well again the same edit goes through.
	ws["w3"].Serve(good)
	if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); err != nil {
		t.Fatal(err)
	}
	target.waitHit(t, "/new", 20*time.Second)
}
