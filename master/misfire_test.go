package master_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// strandableTask stores a worker node w1 (running) and a running task it
// alone executes, firing every second, with the given misfire policy; the
// task's last status change is an hour ago.
func strandableTask(t *testing.T, e *env, misfire string) string {
	t.Helper()
	n := &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
		DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
	if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
		t.Fatal(err)
	}
	tk := &store.Task{ID: "t-misfire", Title: "misfire", Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
		Spec: `{"id":"t-misfire","title":"misfire","type":"http","schedule":{"kind":"interval","every":"1s"},` +
			`"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s","misfire":"` + misfire + `"}`,
		Executors: []string{"w1"}}
	if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
		t.Fatal(err)
	}
	e.exec("UPDATE tasks SET updated_at = ? WHERE id = ?", time.Now().UTC().Add(-time.Hour), tk.ID)
	return tk.ID
}

func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	if _, err := e.s.Store.DB.ExecContext(e.ctx, query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// setNode puts a node in a status as of a given time (its updated_at).
func (e *env) setNode(name string, st store.NodeStatus, at time.Time) {
	e.t.Helper()
	e.exec("UPDATE nodes SET status = ?, updated_at = ? WHERE name = ?", st, at.UTC(), name)
}

func (e *env) window(id string) time.Time {
	e.t.Helper()
	at, err := store.MisfireWindow(e.ctx, e.s.Store.DB, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return at
}

var misfireCount = regexp.MustCompile(`misfire: (\d+) fires from (\S+) to (\S+) did not run: no running executor`)

// missed parses the count of a misfire record, 1 for a single fire.
func missed(t *testing.T, r store.Run) int {
	t.Helper()
	if r.Result != protocol.ResultSkipped || r.Node != masterName {
		t.Fatalf("misfire record %+v: want a skipped run by the master", r)
	}
	if strings.HasPrefix(r.Output, "misfire: the fire at ") {
		return 1
	}
	m := misfireCount.FindStringSubmatch(r.Output)
	if m == nil {
		t.Fatalf("misfire record output %q", r.Output)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func (e *env) runsOf(id string) []store.Run {
	e.t.Helper()
	runs, _, err := e.m.Runs().List(e.ctx, id, 500, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

// The fires of a task whose only executor is down are recorded as one
// skipped run, with their exact count, when the executor runs again; the
// window is accounted once, by one of two masters.
func TestMisfireSkipRecordsTheOutageOnceWhenAnExecutorReturns(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := strandableTask(t, e, protocol.MisfireSkip)
		if res := e.m.Tasks().AccountMisfires(e.ctx); res != (master.MisfireResult{}) {
			t.Fatalf("runnable task: %+v, want nothing done", res)
		}
		down := time.Now().UTC().Add(-time.Minute)
		e.setNode("w1", store.StatusOffline, down)
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.Opened != 1 || res.Skipped != 0 {
			t.Fatalf("stranded: %+v, want the window opened, nothing recorded yet", res)
		}
		from := e.window(id)
		if want := down.Truncate(time.Second); !from.Equal(want) {
			t.Fatalf("window opened at %s, want %s (when the executor stopped)", from, want)
		}
		if got, _ := e.m.Tasks().Get(e.ctx, id); got.Runnable {
			t.Fatal("task with its executor offline is runnable")
		}
		e.m.Tasks().AccountMisfires(e.ctx) // still down: nothing more
		if runs := e.runsOf(id); len(runs) != 0 {
			t.Fatalf("%d runs recorded during a short outage, want none yet", len(runs))
		}

		back := from.Add(30 * time.Second)
		e.setNode("w1", store.StatusRunning, back)
		other := newMaster(t, s, func(c *master.Config) { c.Identity = "master2" })
		results := make(chan master.MisfireResult, 2)
		for _, m := range []*master.Master{e.m, other} {
			go func() { results <- m.Tasks().AccountMisfires(e.ctx) }()
		}
		skipped := (<-results).Skipped + (<-results).Skipped
		if skipped != 1 {
			t.Fatalf("two masters recorded %d windows, want 1", skipped)
		}
		runs := e.runsOf(id)
		if len(runs) != 1 {
			t.Fatalf("%d runs, want one skipped run", len(runs))
		}
		r := runs[0]
		r.Node = masterName // either master may have recorded it
		if n := missed(t, r); n != 30 {
			t.Fatalf("count %d in %q, want 30 (one fire a second for 30 s)", n, r.Output)
		}
		if !r.ScheduledAt.Equal(from.Add(time.Second)) {
			t.Fatalf("scheduled at %s, want the first missed fire %s", r.ScheduledAt, from.Add(time.Second))
		}
		if got := e.window(id); !got.IsZero() {
			t.Fatalf("window still open at %s", got)
		}
		got, _ := e.m.Tasks().Get(e.ctx, id)
		if got.RunCount != 1 || got.LastResult != protocol.ResultSkipped {
			t.Fatalf("task run_count %d last_result %q, want the skipped run counted", got.RunCount, got.LastResult)
		}
		if res := e.m.Tasks().AccountMisfires(e.ctx); res != (master.MisfireResult{}) {
			t.Fatalf("again: %+v, want nothing (accounted once)", res)
		}
		if evs := e.events(store.EventFilter{Action: "task.misfire"}); len(evs) != 1 || evs[0].Actor != master.ActorScheduler ||
			!strings.Contains(evs[0].Detail, "30 fires") {
			t.Fatalf("misfire events %+v, want one by the scheduler with the count", evs)
		}
	})
}

// A long outage is recorded window by window while it lasts, and the windows
// never overlap: together they count every missed fire once.
func TestMisfireSkipRecordsALongOutagePerWindow(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s, func(c *master.Config) { c.MisfireWindow = time.Minute })
		id := strandableTask(t, e, "") // the default policy is skip
		down := time.Now().UTC().Add(-150 * time.Second).Truncate(time.Second)
		e.setNode("w1", store.StatusIdle /* disabled */, down)
		res := e.m.Tasks().AccountMisfires(e.ctx)
		if res.Opened != 1 || res.Skipped != 1 {
			t.Fatalf("150 s into the outage: %+v, want the window opened and recorded", res)
		}
		first := e.runsOf(id)
		if len(first) != 1 {
			t.Fatalf("%d runs, want 1", len(first))
		}
		n1 := missed(t, first[0])
		moved := e.window(id)
		if !moved.Equal(down.Add(time.Duration(n1) * time.Second)) {
			t.Fatalf("window moved to %s after %d fires from %s", moved, n1, down)
		}
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.Skipped != 0 {
			t.Fatalf("right after a record: %+v, want nothing until the next window", res)
		}
		// A few more fires pass, then the executor runs again.
		storetest.Eventually(t, 20*time.Second, func() bool { return time.Since(moved) > 3*time.Second }, "clock")
		back := time.Now().UTC().Truncate(time.Second)
		e.setNode("w1", store.StatusRunning, back)
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.Skipped != 1 {
			t.Fatalf("executor back: %+v, want the rest recorded", res)
		}
		runs := e.runsOf(id)
		if len(runs) != 2 {
			t.Fatalf("%d runs, want 2", len(runs))
		}
		total := 0
		for _, r := range runs {
			total += missed(t, r)
		}
		if want := int(back.Sub(down) / time.Second); total != want {
			t.Fatalf("windows count %d fires together, want %d (every second from %s to %s, once)", total, want, down, back)
		}
	})
}

// A task paused during the outage: the fires up to the pause are recorded,
// those while paused are not misfires.
func TestMisfireWindowEndsWhenTheTaskIsPaused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := strandableTask(t, e, protocol.MisfireRunOnce)
		down := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
		e.setNode("w1", store.StatusOffline, down)
		e.m.Tasks().AccountMisfires(e.ctx)
		e.exec("UPDATE tasks SET status = ?, updated_at = ? WHERE id = ?", store.TaskPaused, down.Add(10*time.Second), id)
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.Skipped != 1 || res.CaughtUp != 0 {
			t.Fatalf("paused during the outage: %+v, want the fires so far recorded skipped, no catch-up", res)
		}
		runs := e.runsOf(id)
		if len(runs) != 1 || missed(t, runs[0]) != 10 || !strings.Contains(runs[0].Output, "paused") {
			t.Fatalf("runs %+v, want one record of 10 fires saying the task was paused", runs)
		}
		if !e.window(id).IsZero() {
			t.Fatal("window still open")
		}
	})
}

// Under run_once the outage of a task whose only executor was disabled ends
// in one catch-up run on it as soon as it is enabled again, and no skipped
// run: all through the real master and a real worker.
func TestMisfireRunOnceCatchesUpOnceWhenTheExecutorIsEnabled(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		var hits atomic.Int64
		target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
		t.Cleanup(target.Close)
		url := e.serveMaster()
		tw := startWorker(t, "w1", func(c *worker.Config) { c.MasterURL = url })
		e.create(tw)
		e.connect("w1")
		e.enable("w1")
		in := httpInput("w1")
		in.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}
		in.HTTP.URL = target.URL + "/tick"
		in.Misfire = protocol.MisfireRunOnce
		tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Nodes().Disable(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		// The master reacts to the change by itself: the window opens.
		storetest.Eventually(t, 10*time.Second, func() bool { return !e.window(tk.ID).IsZero() }, "no misfire window opened")
		from := e.window(tk.ID)
		storetest.Eventually(t, 20*time.Second, func() bool { return time.Since(from) > 3*time.Second }, "clock")
		manual := func() (n int) {
			for _, r := range e.runsOf(tk.ID) {
				if r.Manual {
					n++
				}
				if r.Result == protocol.ResultSkipped {
					t.Fatalf("skipped run %q under run_once", r.Output)
				}
			}
			return n
		}
		if _, err := e.m.Nodes().Enable(e.ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		storetest.Eventually(t, 20*time.Second, func() bool { return manual() >= 1 }, "no catch-up run recorded")
		storetest.Eventually(t, 10*time.Second, func() bool { return e.window(tk.ID).IsZero() }, "window not closed")
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.CaughtUp != 0 {
			t.Fatalf("again: %+v, want no second catch-up", res)
		}
		if n := manual(); n != 1 {
			t.Fatalf("%d catch-up runs, want 1", n)
		}
		// Its record says what it stands for: the count, and a first line.
		for _, r := range e.runsOf(tk.ID) {
			if r.Manual && (r.Covers < 3 || !strings.HasPrefix(r.Output, "catch-up run (misfire policy run_once) for ")) {
				t.Fatalf("catch-up run covers %d, output %q: want at least the 3 missed fires, said first", r.Covers, r.Output)
			}
		}
		evs := e.events(store.EventFilter{Action: "task.misfire"})
		if len(evs) != 1 || !strings.Contains(evs[0].Detail, "one catch-up run sent to w1") {
			t.Fatalf("misfire events %+v, want one naming the catch-up", evs)
		}
		if hits.Load() == 0 {
			t.Fatal("the target was never called")
		}
	})
}

// A running task left with no executor at all (its last one deleted) is
// missed from then on, not since it last changed status.
func TestMisfireWindowOfATaskWithNoExecutorLeftOpensNow(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := strandableTask(t, e, protocol.MisfireSkip)
		e.exec("DELETE FROM task_executors WHERE task_id = ?", id)
		before := time.Now().UTC().Truncate(time.Second)
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.Opened != 1 || res.Skipped != 0 {
			t.Fatalf("no executor left: %+v, want the window opened and nothing recorded", res)
		}
		if from := e.window(id); from.Before(before) {
			t.Fatalf("window opened at %s, before the pass at %s: fires that ran would count", from, before)
		}
	})
}

// A catch-up run a worker made (after its restart, or when a master answers
// again) is stored with what it stands for and leaves a task.misfire event;
// a count out of range refuses the run.
func TestIngestCatchUpRunKeepsItsCountAndLeavesAnEvent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		w1 := e.fakeNode("w1")
		e.storeTask("t1", store.TaskRunning, []string{"w1"}, nil, 0)
		now := time.Now().UTC().Truncate(time.Second)
		first := now.Add(-10 * time.Second)
		catchUp := report("cu1", "t1", "w1", first)
		catchUp.StartedAt, catchUp.EndedAt = now, now.Add(time.Millisecond)
		catchUp.Covers = 7
		catchUp.Output = protocol.CatchUpLine(7, first, first.Add(6*time.Second), false) + "\nok"
		bad := report("cu2", "t1", "w1", first)
		bad.Covers = -1
		resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{catchUp, bad})
		if err != nil || resp.Accepted != 1 || len(resp.Rejected) != 1 || resp.Rejected[0].ID != "cu2" {
			t.Fatalf("ingest: %+v %v, want cu1 accepted and cu2 refused", resp, err)
		}
		if r := e.stored("cu1"); r == nil || r.Covers != 7 {
			t.Fatalf("stored %+v, want covers 7", r)
		}
		evs := e.events(store.EventFilter{Action: "task.misfire"})
		if len(evs) != 1 || !strings.Contains(evs[0].Detail, "catch-up run cu1 on w1 for 7 missed fires") {
			t.Fatalf("misfire events %+v, want one naming the catch-up and its count", evs)
		}
		// Delivered again: a duplicate, no second event.
		if _, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{catchUp}); err != nil {
			t.Fatal(err)
		}
		if n := len(e.events(store.EventFilter{Action: "task.misfire"})); n != 1 {
			t.Fatalf("%d misfire events after a duplicate delivery, want 1", n)
		}
	})
}

// An executor the health checks take offline died after its last good
// probe, not when the checks gave up on it: the outage window starts there
// (after the latest fire that has a run record), so the fires between its
// death and its detection are accounted for too; the same moment is what a
// restarted worker is told (down_since) so neither side counts a fire twice.
func TestMisfireWindowOfADeadExecutorStartsAtItsLastGoodProbe(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		id := strandableTask(t, e, protocol.MisfireSkip)
		seen := time.Now().UTC().Add(-90 * time.Second).Truncate(time.Second)
		e.exec("UPDATE nodes SET last_seen = ? WHERE name = ?", seen, "w1")
		// Its last reported run is 5 s after that probe.
		lastRun := seen.Add(5 * time.Second)
		e.exec("INSERT INTO runs (id, task_id, node, scheduled_at, started_at, ended_at, duration_ms, result, attempt, http_status, output, manual, binary_output, created_at, covers) "+
			"VALUES ('r-last', ?, 'w1', ?, ?, ?, 1, 'success', 1, 200, '', ?, ?, ?, 0)", id, lastRun, lastRun, lastRun, false, false, lastRun)
		for range 3 {
			if _, err := store.RecordProbeFailure(e.ctx, s.Store.DB, "w1", 3, "connection refused", nil); err != nil {
				t.Fatal(err)
			}
		}
		n := e.node("w1")
		if n.Status != store.StatusOffline || !n.DownSince.Equal(seen) {
			t.Fatalf("after 3 failed probes: status %s down_since %s, want offline since the last good probe %s", n.Status, n.DownSince, seen)
		}
		if res := e.m.Tasks().AccountMisfires(e.ctx); res.Opened != 1 {
			t.Fatalf("stranded: %+v, want the window opened", res)
		}
		if from := e.window(id); !from.Equal(lastRun) {
			t.Fatalf("window opened at %s, want %s (the last fire with a run, after the last good probe %s)", from, lastRun, seen)
		}
		// An admin's disable of a running node: down since that moment.
		e.exec("UPDATE nodes SET status = ?, down_since = NULL WHERE name = ?", store.StatusRunning, "w1")
		before := time.Now().UTC().Add(-time.Second)
		if err := store.TransitionNode(e.ctx, s.Store.DB, "w1", store.Transition{From: []store.NodeStatus{store.StatusRunning}, To: store.StatusIdle}); err != nil {
			t.Fatal(err)
		}
		if n := e.node("w1"); n.DownSince.Before(before) {
			t.Fatalf("disabled: down_since %s, want now", n.DownSince)
		}
		idleSince := e.node("w1").DownSince
		// Idle, then offline: still down since it stopped running.
		if err := store.TransitionNode(e.ctx, s.Store.DB, "w1", store.Transition{From: []store.NodeStatus{store.StatusIdle}, To: store.StatusOffline}); err != nil {
			t.Fatal(err)
		}
		if n := e.node("w1"); !n.DownSince.Equal(idleSince) {
			t.Fatalf("idle then offline: down_since %s, want %s (when it stopped running)", n.DownSince, idleSince)
		}
		if err := store.TransitionNode(e.ctx, s.Store.DB, "w1", store.Transition{From: []store.NodeStatus{store.StatusOffline}, To: store.StatusRunning}); err != nil {
			t.Fatal(err)
		}
		if n := e.node("w1"); !n.DownSince.IsZero() {
			t.Fatalf("running again: down_since %s, want none", n.DownSince)
		}
	})
}

// countingHandler counts the log records with a given message and keeps
// their "tasks" attribute.
type countingHandler struct {
	slog.Handler
	msg   string
	mu    *sync.Mutex
	lines *[]int64
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		var n int64 = -1
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "tasks" {
				n = a.Value.Int64()
			}
			return true
		})
		h.mu.Lock()
		*h.lines = append(*h.lines, n)
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

// When the workers stop, every task they ran loses its executors in the same
// pass: one warning says so with the count, not one per task.
func TestStrandedTasksAreLoggedOncePerPassWithACount(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	var mu sync.Mutex
	var lines []int64
	log := slog.New(countingHandler{Handler: storetest.Logger(t).Handler(), msg: "tasks have no running executor: their fires are missed until one runs",
		mu: &mu, lines: &lines})
	m := master.New(master.Config{PasswordCost: testPasswordCost, Identity: masterName, ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health:      master.HealthConfig{Interval: time.Second, Timeout: probeTimeout, MaxFailures: 3},
		CallTimeout: 5 * time.Second, ShutdownWait: 2 * time.Second}, s.Store, log)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	e := &env{t: t, ctx: storetest.Ctx(t), s: s, m: m}
	strandableTask(t, e, protocol.MisfireSkip)
	const tasks = 300
	for i := range tasks - 1 {
		id := fmt.Sprintf("t-more-%d", i)
		tk := &store.Task{ID: id, Title: id, Type: "http", Status: store.TaskRunning, Keepers: "[]", Children: "[]",
			Spec: `{"id":"` + id + `","title":"x","type":"http","schedule":{"kind":"interval","every":"1s"},` +
				`"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"1s"}`,
			Executors: []string{"w1"}}
		if err := store.CreateTask(e.ctx, s.Store.DB, tk); err != nil {
			t.Fatal(err)
		}
	}
	e.setNode("w1", store.StatusOffline, time.Now().Add(-time.Minute))
	if res := m.Tasks().AccountMisfires(e.ctx); res.Opened != tasks {
		t.Fatalf("opened %d windows, want %d", res.Opened, tasks)
	}
	m.Tasks().AccountMisfires(e.ctx) // nothing changed: nothing more to say
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || lines[0] != tasks {
		t.Fatalf("warnings logged: %v (their task counts), want one line counting %d tasks", lines, tasks)
	}
}
