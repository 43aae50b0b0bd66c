package master_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// memberAs is the principal of a user with role in project only.
func memberAs(t *testing.T, e *env, name, project string, role master.ProjectRole) *master.Principal {
	t.Helper()
	if err := store.CreateUser(e.ctx, e.s.Store.DB, &store.User{Username: name, PasswordHash: "x", Role: store.RoleNone}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Projects().SetMember(e.ctx, project, name, role); err != nil {
		t.Fatal(err)
	}
	ms, err := store.MembershipsOf(e.ctx, e.s.Store.DB, name)
	if err != nil {
		t.Fatal(err)
	}
	p := &master.Principal{Name: name, Role: store.RoleNone, Memberships: map[int64]master.ProjectRole{}}
	for id, r := range ms {
		p.Memberships[id] = master.ProjectRole(r)
	}
	return p
}

// oldWorker hides the batch calls of a worker, as one of an earlier version.
func oldWorker(tw *testWorker) {
	router := tw.Router()
	tw.Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == protocol.PathTaskBatch || r.URL.Path == protocol.PathStartupPart {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusNotFound)
			_, _ = rw.Write([]byte(`{"error":"no such route"}`))
			return
		}
		router.ServeHTTP(rw, r)
	}))
}

// TestBulkSaveAndActionsReportEachTask: one bulk save creates and updates
// many tasks, each checked on its own (an invalid one, an unknown
// executor, a project the caller may not edit, a key taken by an earlier
// task of the same call, a task that is not stopped are refused, the others
// saved) and started on their workers, an old worker one call per task;
// bulk actions then report each task, a dead executor's task fails alone
// and is rolled back on the healthy one.
func TestBulkSaveAndActionsReportEachTask(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ws := runningWorkers(e, "w1", "w2", "down")
		oldWorker(ws["w2"])
		if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "other"}); err != nil {
			t.Fatal(err)
		}
		bea := master.WithPrincipal(e.ctx, memberAs(t, e, "bea", master.DefaultProject, master.ProjectEditor))
		running, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Tasks().Start(e.ctx, running.ID); err != nil {
			t.Fatal(err)
		}
		stopped, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		named := func(title string, executors ...string) master.TaskInput {
			in := httpInput(executors...)
			in.Title = title
			return in
		}
		invalid := named("no schedule", "w1")
		invalid.Schedule = protocol.Schedule{}
		keyed, again := named("keyed", "w1"), named("keyed again", "w2")
		keyed.Key, again.Key = "k1", "k1"
		foreign := named("foreign", "w1")
		foreign.Project = "other"
		update := named("renamed", "w2")
		update.ID = stopped.ID
		upRunning := named("renamed running", "w1")
		upRunning.ID = running.ID
		inputs := []master.TaskInput{
			named("a", "w1"), invalid, named("ghost", "ghost"), foreign, keyed, again, update, upRunning,
			named("b", "w1", "w2"), named("c", "w2"),
		}
		results, err := e.m.Tasks().Save(bea, inputs, true, "bea")
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			ok, started bool
			err         string
		}{
			{true, true, ""}, {false, false, "schedule"}, {false, false, "unknown node"}, {false, false, "project other not found"},
			{true, true, ""}, {false, false, "is the key of task"}, {true, true, ""}, {false, false, "stop it before editing"},
			{true, true, ""}, {true, true, ""},
		}
		for i, w := range want {
			r := results[i]
			if r.Index != i || r.OK != w.ok || r.Started != w.started || !strings.Contains(r.Error+fmt.Sprint(r.Fields), w.err) {
				t.Errorf("task %d (%s): %+v, want ok %v started %v error %q", i, inputs[i].Title, r, w.ok, w.started, w.err)
			}
		}
		if results[6].ID != stopped.ID || results[6].Action != master.SaveUpdate || results[0].Action != master.SaveCreate {
			t.Errorf("the update and the create are not told apart: %+v %+v", results[6], results[0])
		}
		if got, _ := e.m.Tasks().Get(e.ctx, stopped.ID); got.Title != "renamed" || got.Status != store.TaskRunning {
			t.Errorf("the updated task is %q %s", got.Title, got.Status)
		}
		if got, _ := e.m.Tasks().Get(e.ctx, running.ID); got.Title != "ping" {
			t.Errorf("a refused update changed the running task: %q", got.Title)
		}
		// w1: running, a, keyed, b; w2 (one call per task): renamed, b, c.
		if n1, n2 := ws["w1"].W.Health().RunningTasks, ws["w2"].W.Health().RunningTasks; n1 != 4 || n2 != 3 {
			t.Fatalf("workers schedule %d and %d tasks, want 4 and 3", n1, n2)
		}

		// A viewer may not act anywhere: refused as a whole.
		if _, err := e.m.Tasks().Bulk(master.WithPrincipal(e.ctx, memberAs(t, e, "vic", master.DefaultProject, master.ProjectViewer)),
			"stop", []string{running.ID}); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("a viewer's bulk stop: %v, want forbidden", err)
		}

		// A dead executor fails its task alone, rolled back on the live one.
		shared, err := e.m.Tasks().Create(e.ctx, httpInput("w1", "down"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		alone, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		ws["down"].Srv.CloseClientConnections()
		ws["down"].Srv.Close()
		out, err := e.m.Tasks().Bulk(e.ctx, "start", []string{shared.ID, alone.ID, running.ID, "ghost-id"})
		if err != nil {
			t.Fatal(err)
		}
		if !(!out[0].OK && strings.Contains(out[0].Error, "start failed on node down") && out[1].OK &&
			!out[2].OK && out[2].Refused && strings.Contains(out[2].Error, "already running") && out[3].Refused && out[3].Error == "no such task") {
			t.Fatalf("bulk start with a dead executor: %+v", out)
		}
		if n := ws["w1"].W.Health().RunningTasks; n != 5 {
			t.Fatalf("w1 schedules %d tasks, want 5 (the failed start rolled back)", n)
		}
		if got, _ := e.m.Tasks().Get(e.ctx, shared.ID); got.Status != store.TaskStopped {
			t.Fatalf("the task that failed to start is %s", got.Status)
		}

		// Pause, resume, stop and delete in bulk, each task reported.
		ids := []string{results[0].ID, results[8].ID, results[9].ID}
		for _, step := range []struct {
			action, status string
			w1, w2         int
		}{{"pause", "paused", 5, 3}, {"resume", "running", 5, 3}, {"stop", "stopped", 3, 1}, {"delete", "deleted", 3, 1}} {
			out, err := e.m.Tasks().Bulk(e.ctx, step.action, ids)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out {
				if !r.OK {
					t.Fatalf("bulk %s: %+v", step.action, r)
				}
			}
			for _, id := range ids {
				got, err := store.GetTasks(e.ctx, e.s.Store.DB, []string{id})
				if err != nil {
					t.Fatal(err)
				}
				if st := "deleted"; got[id] != nil {
					st = got[id].Status.String()
					if st != step.status {
						t.Fatalf("after bulk %s task %s is %s", step.action, id, st)
					}
				}
			}
			if n1, n2 := ws["w1"].W.Health().RunningTasks, ws["w2"].W.Health().RunningTasks; n1 != step.w1 || n2 != step.w2 {
				t.Fatalf("after bulk %s workers schedule %d and %d tasks, want %d and %d", step.action, n1, n2, step.w1, step.w2)
			}
		}
		var events int
		if err := e.s.Store.DB.QueryRowContext(e.ctx, "SELECT COUNT(*) FROM events WHERE action = ? AND outcome = ?", "task.create", "ok").Scan(&events); err != nil {
			t.Fatal(err)
		}
		if events != 3+5 { // CreateTask x3, bulk x5 (the update is task.edit)
			t.Errorf("%d task.create events, want 8", events)
		}
	})
}

// TestBulkStartManyTasks: 2,500 tasks saved and started in one call land
// on their worker, a call per 1,000 tasks; a bad bound is refused whole.
func TestBulkStartManyTasks(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ws := runningWorkers(e, "w1")
		var calls int
		router := ws["w1"].Router()
		ws["w1"].Serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == protocol.PathTaskBatch {
				calls++ // the worker's calls of one node come one after another
			}
			router.ServeHTTP(rw, r)
		}))
		inputs := make([]master.TaskInput, 2500)
		for i := range inputs {
			inputs[i] = httpInput("w1")
			inputs[i].Title = fmt.Sprint("t", i)
		}
		results, err := e.m.Tasks().Save(e.ctx, inputs, true, "admin")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if !r.OK || !r.Started {
				t.Fatalf("%+v", r)
			}
		}
		if n := ws["w1"].W.Health().RunningTasks; n != 2500 || calls != 3 {
			t.Fatalf("w1 schedules %d tasks after %d batch calls, want 2500 after 3", n, calls)
		}
		if _, err := e.m.Tasks().Save(e.ctx, make([]master.TaskInput, master.MaxBulkTasks+1), false, "admin"); master.KindOf(err) != master.KindInvalid {
			t.Fatalf("too many tasks: %v", err)
		}
		if _, err := e.m.Tasks().Save(e.ctx, nil, false, "admin"); master.KindOf(err) != master.KindInvalid {
			t.Fatalf("no task: %v", err)
		}
	})
}

// TestRestartPushesEveryTaskBackInParts: a master that starts (a restart,
// a failover) gives every running worker all its tasks again, in parts,
// every worker at once; an old worker gets them in one body.
func TestRestartPushesEveryTaskBackInParts(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ws := runningWorkers(e, "w1", "w2", "w3")
		oldWorker(ws["w3"])
		var inputs []master.TaskInput
		for i := range 2300 {
			in := httpInput([]string{"w1", "w2"}[i%2])
			if i%10 == 0 {
				in = httpInput("w1", "w2", "w3")
			}
			in.Title = fmt.Sprint("t", i)
			inputs = append(inputs, in)
		}
		results, err := e.m.Tasks().Save(e.ctx, inputs, true, "admin")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if !r.Started {
				t.Fatalf("%+v", r)
			}
		}
		want := map[string]int{"w1": 1150, "w2": 1150 + 230, "w3": 230}
		for name, tw := range ws {
			// The workers lose their schedule (as if the master had told
			// them wrong); the restarted master's view is the truth.
			if err := tw.W.Startup(e.ctx, protocol.StartupRequest{}); err != nil {
				t.Fatal(err)
			}
			if n := tw.W.Health().RunningTasks; n != 0 {
				t.Fatalf("%s kept %d tasks", name, n)
			}
		}
		if err := e.m.Start(e.ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for name, tw := range ws {
			for tw.W.Health().RunningTasks != want[name] {
				if time.Now().After(deadline) {
					t.Fatalf("%s schedules %d tasks after the restart, want %d", name, tw.W.Health().RunningTasks, want[name])
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
}

// TestCreateDelayedBatchReportsEachTask: a batch creates the valid delayed
// tasks, finds the pending one of a key (created before or earlier in the
// batch) and refuses the invalid ones and those of a project whoever asks
// may not edit, each on its own.
func TestCreateDelayedBatchReportsEachTask(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		runningWorkers(e, "w1")
		if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "other"}); err != nil {
			t.Fatal(err)
		}
		bea := master.WithPrincipal(e.ctx, memberAs(t, e, "bea", master.DefaultProject, master.ProjectEditor))
		in := func(key string) master.DelayedInput {
			return master.DelayedInput{SourceApp: "app", Topic: "t", ContentKey: key, Delay: json.RawMessage(`"1h"`), NotifyURL: "http://127.0.0.1:1/x", Executors: []string{"w1"}}
		}
		before, created, err := e.m.Delayed().CreateDelayed(e.ctx, in("k0"), "admin")
		if err != nil || !created {
			t.Fatal(err)
		}
		bad := in("k2")
		bad.NotifyURL = "ftp://x"
		foreign := in("k3")
		foreign.Project = "other"
		ghost := in("k4")
		ghost.Executors = []string{"ghost"}
		results, err := e.m.Delayed().CreateDelayedBatch(bea, []master.DelayedInput{in("k1"), in("k0"), bad, foreign, in("k1"), ghost, in("k5")}, "bea")
		if err != nil {
			t.Fatal(err)
		}
		r := results
		if !(r[0].OK && r[0].Created && r[1].OK && !r[1].Created && r[1].ID == before.ID && !r[2].OK && r[2].Fields["notify_url"] != "" &&
			!r[3].OK && strings.Contains(r[3].Error, "not found") && r[4].OK && !r[4].Created && r[4].ID == r[0].ID &&
			!r[5].OK && strings.Contains(r[5].Fields["executors"], "unknown node") && r[6].OK && r[6].Created) {
			t.Fatalf("batch results: %+v", r)
		}
		list, total, err := e.m.Delayed().ListDelayed(e.ctx, store.DelayedFilter{Limit: 10})
		if err != nil || total != 3 || len(list) != 3 {
			t.Fatalf("%d delayed tasks stored (%v), want 3", total, err)
		}
		if _, err := e.m.Delayed().CreateDelayedBatch(e.ctx, make([]master.DelayedInput, master.MaxDelayedBatch+1), "admin"); master.KindOf(err) != master.KindInvalid {
			t.Fatalf("too many: %v", err)
		}
	})
}
