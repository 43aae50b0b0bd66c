package master_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// hitTarget counts the requests it receives, by path, and answers each
// with its path.
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
		_, _ = rw.Write([]byte("path=" + r.URL.Path + "\n"))
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
// scheduled time, every run a success. Each run records the version it
// ran, the one whose URL it requested, and that is the version in force
// at its fire: a run that started before an edit was asked for ran an
// older version, and one scheduled after an edit had switched every
// executor ran that version or a newer one.
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
	// asked[v] and switched[v]: when the edit that made version v was
	// asked for, and when it had reached every executor.
	asked, switched := map[int]time.Time{}, map[int]time.Time{}
	for i := 1; i <= 20; i++ {
		in.HTTP.URL = fmt.Sprintf("%s/v%d", target.URL, i)
		switch i {
		case 8:
			in.Executors = []string{"w1", "w2"} // w3 leaves
		case 14:
			in.Executors = []string{"w1", "w2", "w3"} // and joins again
		}
		asked[i+1] = time.Now()
		got, err := e.m.Tasks().Update(e.ctx, tk.ID, in)
		switched[i+1] = time.Now()
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
				v := r.TaskVersion
				if want := fmt.Sprintf("path=/v%d\n", v-1); !strings.Contains(r.Output, want) {
					t.Errorf("run %s records version %d but requested %q", r.ID, v, r.Output)
				}
				// The version was pushed after its edit was asked for: a run
				// of it started after that. The next version had reached
				// every executor when its edit returned: a fire scheduled
				// after that (give or take the timer's 200 ms) runs it.
				if at, ok := asked[v]; ok && r.StartedAt.Before(at) {
					t.Errorf("run %s started at %s with version %d, asked for only at %s", r.ID, r.StartedAt, v, at)
				}
				if at, ok := switched[v+1]; ok && r.ScheduledAt.After(at.Add(200*time.Millisecond)) {
					t.Errorf("the fire of %s ran version %d, though version %d was in force on every executor since %s",
						r.ScheduledAt, v, v+1, at)
				}
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
	if vs, _, err := e.m.Tasks().Versions(e.ctx, tk.ID, 0, 0); err != nil || len(vs) != 1 || !vs[0].Current {
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

// TestTaskVersionToAWorkerOfAnEarlierVersion: a worker of an earlier
// version reads its bodies strictly and refuses a task's version as an
// unknown field; the master sends it the same call without versions, so a
// start and a live edit reach it mid-upgrade as they did before versions.
func TestTaskVersionToAWorkerOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	ws := reportingWorkers(e, url, "w1")
	var refused atomic.Int64
	good := ws["w1"].Router()
	ws["w1"].Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		if bytes.Contains(body, []byte(`"version":`)) {
			refused.Add(1)
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusBadRequest)
			_, _ = rw.Write([]byte(`{"error":"invalid JSON body: json: unknown field \"version\""}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		good.ServeHTTP(rw, r)
	}))
	target := newHitTarget(t)
	in := httpInput("w1")
	in.Schedule = protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second), Align: protocol.AlignEpoch}
	in.HTTP.URL = target.URL + "/old"
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
		t.Fatalf("start on a worker of an earlier version: %v", err)
	}
	target.waitHit(t, "/old", 20*time.Second)
	in.HTTP.URL = target.URL + "/new"
	if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); err != nil {
		t.Fatalf("live edit on a worker of an earlier version: %v", err)
	}
	target.waitHit(t, "/new", 20*time.Second)
	if refused.Load() < 2 {
		t.Fatalf("the worker refused %d bodies for their versions: the start and the edit carried none", refused.Load())
	}
}
