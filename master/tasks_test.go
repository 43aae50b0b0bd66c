package master_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// httpInput is an hourly task on the hour (epoch-aligned, so the tests
// may claim fires at the multiples of an hour).
func httpInput(executors ...string) master.TaskInput {
	return master.TaskInput{
		TaskDef: protocol.TaskDef{Title: "ping", Type: protocol.TaskHTTP,
			Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour), Align: protocol.AlignEpoch},
			HTTP:     &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/"}},
		Executors: executors,
	}
}

// runningWorkers starts in-process workers, connected and enabled.
func runningWorkers(e *env, names ...string) map[string]*testWorker {
	out := map[string]*testWorker{}
	for _, n := range names {
		tw := startWorker(e.t, n)
		e.create(tw)
		e.connect(n)
		e.enable(n)
		out[n] = tw
	}
	return out
}

func TestCreateTaskValidation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		runningWorkers(e, "w1")
		before, _, _ := e.m.Tasks().List(e.ctx, store.TaskFilter{})

		bad := map[string]func(*master.TaskInput){
			"executors": func(in *master.TaskInput) { in.Executors = []string{"ghost"} },
			"keepers":   func(in *master.TaskInput) { in.Keepers = []string{"nobody"} },
			"children":  func(in *master.TaskInput) { in.Children = []string{"no-such-task"} },
			"http.url":  func(in *master.TaskInput) { in.HTTP.URL = "::" },
		}
		for field, edit := range bad {
			in := httpInput("w1")
			edit(&in)
			if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); !isFieldErrors(err, field) {
				t.Errorf("%s: got %v, want a field error on it", field, err)
			}
		}
		in := httpInput(masterName)
		if _, err := e.m.Tasks().Create(e.ctx, in, "admin"); !isFieldErrors(err, "executors") {
			t.Errorf("master as executor: %v", err)
		}
		after, _, _ := e.m.Tasks().List(e.ctx, store.TaskFilter{})
		if len(after) != len(before) {
			t.Fatal("refused input created a task")
		}

		// Children: itself and cycles are refused on edit.
		a, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		bIn := httpInput("w1")
		bIn.Children = []string{a.ID}
		b, err := e.m.Tasks().Create(e.ctx, bIn, "admin")
		if err != nil {
			t.Fatal(err)
		}
		self := httpInput("w1")
		self.Children = []string{a.ID}
		if _, err := e.m.Tasks().Update(e.ctx, a.ID, self); !isFieldErrors(err, "children") {
			t.Fatalf("self child: %v", err)
		}
		cyc := httpInput("w1")
		cyc.Children = []string{b.ID}
		_, err = e.m.Tasks().Update(e.ctx, a.ID, cyc)
		if !isFieldErrors(err, "children") || !strings.Contains(err.Error(), "cycle") {
			t.Fatalf("cycle a→b→a: %v", err)
		}
		if got, _ := e.m.Tasks().Get(e.ctx, a.ID); len(got.Children) != 0 {
			t.Fatalf("a refused edit changed the task: %+v", got.Children)
		}
	})
}

func TestCreateTaskWithoutExecutorsGetsTwoRunningWorkers(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		runningWorkers(e, "w1", "w2", "w3")
		idle := startWorker(t, "idle")
		e.create(idle)
		e.connect("idle")
		for i := 0; i < 10; i++ {
			tk, err := e.m.Tasks().Create(e.ctx, httpInput(), "admin")
			if err != nil {
				t.Fatal(err)
			}
			if len(tk.Executors) != 2 || tk.Executors[0] == tk.Executors[1] {
				t.Fatalf("executors %v, want two distinct", tk.Executors)
			}
			for _, x := range tk.Executors {
				if x == "idle" {
					t.Fatal("an idle worker was picked")
				}
			}
		}
		// No running worker at all: a clear error.
		e2 := newEnv(t, storetest.Open(t, s.Name))
		if _, err := e2.m.Tasks().Create(e2.ctx, httpInput(), "admin"); !isFieldErrors(err, "executors") {
			t.Fatalf("no running worker: %v", err)
		}
	})
}

func TestStartTaskRollsBackAndNamesTheFailingNode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ws := runningWorkers(e, "up", "down")
		tk, err := e.m.Tasks().Create(e.ctx, httpInput("up", "down"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		ws["down"].Srv.CloseClientConnections()
		ws["down"].Srv.Close() // dead, but still "running" in the database
		_, err = e.m.Tasks().Start(e.ctx, tk.ID)
		if !errors.Is(err, master.ErrWorker) || !strings.Contains(err.Error(), "down") || strings.Contains(err.Error(), "node up") {
			t.Fatalf("start with a dead executor: %v, want ErrWorker naming node down", err)
		}
		got, _ := e.m.Tasks().Get(e.ctx, tk.ID)
		if got.Status != store.TaskStopped {
			t.Fatalf("task status %d after a failed start, want stopped", got.Status)
		}
		if n := ws["up"].W.Health().RunningTasks; n != 0 {
			t.Fatalf("the healthy executor kept the task after the rollback (%d tasks)", n)
		}

		// Without running executors: the SPEC's message.
		tk2, err := e.m.Tasks().Create(e.ctx, httpInput("up"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Nodes().Disable(e.ctx, "up"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Start(e.ctx, tk2.ID); !errors.Is(err, master.ErrState) || !strings.Contains(err.Error(), "no running worker for this task") {
			t.Fatalf("start without running executors: %v", err)
		}
	})
}

func TestTaskLifecycleOnWorkersAndRePushOnEnable(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ws := runningWorkers(e, "a", "b")
		tk, err := e.m.Tasks().Create(e.ctx, httpInput("a", "b"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Pause(e.ctx, tk.ID); !errors.Is(err, master.ErrState) {
			t.Fatalf("pause a stopped task: %v", err)
		}
		if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		for n, tw := range ws {
			if tw.W.Health().RunningTasks != 1 {
				t.Fatalf("%s does not schedule the started task", n)
			}
		}
		// Edited while running, the task leaves b and stays on a; back on both.
		if got, err := e.m.Tasks().Update(e.ctx, tk.ID, httpInput("a")); err != nil || got.Status != store.TaskRunning {
			t.Fatalf("edit a running task: %v", err)
		}
		if ws["a"].W.Health().RunningTasks != 1 || ws["b"].W.Health().RunningTasks != 0 {
			t.Fatal("an edit of a running task that dropped executor b left it on b, or took it off a")
		}
		if _, err := e.m.Tasks().Update(e.ctx, tk.ID, httpInput("a", "b")); err != nil {
			t.Fatalf("edit a running task: %v", err)
		}
		if ws["b"].W.Health().RunningTasks != 1 {
			t.Fatal("an edit of a running task that added executor b did not start it there")
		}
		if _, err := e.m.Tasks().Pause(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Resume(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		// A node that is disabled and enabled again gets its running tasks back.
		if _, err := e.m.Nodes().Disable(e.ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if ws["b"].W.Health().RunningTasks != 0 {
			t.Fatal("a disabled node kept its tasks")
		}
		if _, err := e.m.Nodes().Enable(e.ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if ws["b"].W.Health().RunningTasks != 1 {
			t.Fatal("an enabled node did not get its running task back")
		}
		if _, err := e.m.Tasks().Stop(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		for n, tw := range ws {
			if tw.W.Health().RunningTasks != 0 {
				t.Fatalf("%s still schedules a stopped task", n)
			}
		}
		if err := e.m.Tasks().Delete(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Get(e.ctx, tk.ID); !errors.Is(err, master.ErrNotFound) {
			t.Fatalf("deleted task: %v", err)
		}
	})
}

func TestIngestRunsIsIdempotent(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		runningWorkers(e, "w1")
		tk, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		mk := func(id string) protocol.RunReport {
			return protocol.RunReport{ID: id, TaskID: tk.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now.Add(time.Millisecond), Result: "success", Attempt: 1}
		}
		batch := []protocol.RunReport{mk("r1"), mk("r2"), mk("r2")}
		resp, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), batch)
		if err != nil || resp.Accepted != 2 || resp.Duplicates != 1 {
			t.Fatalf("first delivery: %+v %v", resp, err)
		}
		resp, err = e.m.Runs().Ingest(e.ctx, e.node("w1"), batch)
		if err != nil || resp.Accepted != 0 || resp.Duplicates != 3 {
			t.Fatalf("redelivery: %+v %v", resp, err)
		}
		got, _ := e.m.Tasks().Get(e.ctx, tk.ID)
		if got.RunCount != 2 {
			t.Fatalf("run_count %d, want 2", got.RunCount)
		}
		// Reports in another node's name, or malformed, are rejected one by
		// one; the good ones of the same batch are stored.
		other := mk("r3")
		other.Node = "w9"
		badResult := mk("r4")
		badResult.Result = "great"
		resp, err = e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{other, mk("r5"), badResult})
		if err != nil || resp.Accepted != 1 || len(resp.Rejected) != 2 || resp.Rejected[0].ID != "r3" || resp.Rejected[1].ID != "r4" {
			t.Fatalf("mixed batch: %+v %v", resp, err)
		}
		if _, total, _ := e.m.Runs().List(e.ctx, tk.ID, 10, 0); total != 3 {
			t.Fatalf("runs stored %d, want 3", total)
		}
	})
}

func TestStopTaskWhoseExecutorsAreAllOffline(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ws := runningWorkers(e, "gone")
		tk, err := e.m.Tasks().Create(e.ctx, httpInput("gone"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Start(e.ctx, tk.ID); err != nil {
			t.Fatal(err)
		}
		_ = ws["gone"].W.Stop(e.ctx) // no master to tell: only the node row says offline
		reason := "test: gone"
		if err := store.TransitionNode(e.ctx, e.s.Store.DB, "gone", store.Transition{From: []store.NodeStatus{store.StatusRunning}, To: store.StatusOffline, Reason: &reason}); err != nil {
			t.Fatal(err)
		}
		got, err := e.m.Tasks().Stop(e.ctx, tk.ID)
		if err != nil || got.Status != store.TaskStopped {
			t.Fatalf("stop with every executor offline: %+v %v", got, err)
		}
		now := time.Now().UTC()
		run := protocol.RunReport{ID: "kept", TaskID: tk.ID, Node: "gone", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "success", Attempt: 1}
		if _, err := e.m.Runs().Ingest(e.ctx, e.node("gone"), []protocol.RunReport{run}); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Tasks().Delete(e.ctx, tk.ID); err != nil {
			t.Fatalf("delete: %v", err)
		}
		// The deleted task's runs stay listable; an unknown task is not found.
		if runs, total, err := e.m.Runs().List(e.ctx, tk.ID, 10, 0); err != nil || total != 1 || runs[0].ID != "kept" {
			t.Fatalf("runs of a deleted task: %v %d %v", runs, total, err)
		}
		if _, _, err := e.m.Runs().List(e.ctx, "no-such-task", 10, 0); !errors.Is(err, master.ErrNotFound) {
			t.Fatalf("runs of an unknown task: %v", err)
		}
	})
}

// Concurrent batches that touch the same tasks all land (no deadlock refusal)
// and every run is counted once.
func TestConcurrentIngestOnSharedTasks(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		runningWorkers(e, "w1")
		var ids []string
		for i := 0; i < 10; i++ {
			tk, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tk.ID)
		}
		now := time.Now().UTC()
		errs := make(chan error, 4)
		for g := 0; g < 4; g++ {
			go func() {
				var batch []protocol.RunReport
				for i := 0; i < 200; i++ {
					id := fmt.Sprintf("g%d-r%d", g, i)
					batch = append(batch, protocol.RunReport{ID: id, TaskID: ids[(i+g)%len(ids)], Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "success", Attempt: 1})
				}
				_, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), batch)
				errs <- err
			}()
		}
		for g := 0; g < 4; g++ {
			if err := <-errs; err != nil {
				t.Fatalf("concurrent ingest: %v", err)
			}
		}
		var total int64
		for _, id := range ids {
			tk, _ := e.m.Tasks().Get(e.ctx, id)
			total += tk.RunCount
		}
		if total != 800 {
			t.Fatalf("run_count sum %d, want 800", total)
		}
	})
}

// A successful run of a parent runs each child once, on one of its executors.
func TestSuccessfulRunStartsChildren(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		runningWorkers(e, "w1")
		child, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		in := httpInput("w1")
		in.Children = []string{child.ID}
		parent, err := e.m.Tasks().Create(e.ctx, in, "admin")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		ok := protocol.RunReport{ID: "p1", TaskID: parent.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "success", Attempt: 1}
		if _, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{ok}); err != nil {
			t.Fatal(err)
		}
		storetest.Eventually(t, 10*time.Second, func() bool {
			evs, _, err := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "task.run", Target: child.ID, Actor: "task " + parent.ID, Outcome: "ok"})
			return err == nil && len(evs) == 1
		}, "the child was not run once by its parent")
		// A failed run starts no child.
		bad := ok
		bad.ID, bad.Result = "p2", "failed"
		if _, err := e.m.Runs().Ingest(e.ctx, e.node("w1"), []protocol.RunReport{bad}); err != nil {
			t.Fatal(err)
		}
		evs, _, _ := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "task.run", Target: child.ID})
		if len(evs) != 1 {
			t.Fatalf("child runs after a failure: %d events", len(evs))
		}
	})
}
