package master_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// fakeNode records a running auto worker directly in the store (nobody
// listens at its host: calls to it fail fast).
func (e *env) fakeNode(name string) *store.Node {
	e.t.Helper()
	n := &store.Node{Name: name, Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Status: store.StatusRunning,
		DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
	if err := store.CreateNode(e.ctx, e.s.Store.DB, n); err != nil {
		e.t.Fatal(err)
	}
	return e.node(name)
}

// storeTask records a task directly in the store.
func (e *env) storeTask(id string, status store.TaskStatus, executors []string, children []string, retries int) {
	e.t.Helper()
	ch, _ := json.Marshal(children)
	spec, _ := json.Marshal(protocol.TaskDef{ID: id, Title: id, Type: protocol.TaskHTTP, Retries: retries,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		HTTP:     &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/"}, Timeout: protocol.Duration(time.Second)})
	tk := &store.Task{ID: id, Title: id, Type: "http", Status: status, Keepers: "[]", Children: string(ch), Spec: string(spec), Executors: executors}
	if err := store.CreateTask(e.ctx, e.s.Store.DB, tk); err != nil {
		e.t.Fatal(err)
	}
}

func report(id, task, node string, at time.Time) protocol.RunReport {
	return protocol.RunReport{ID: id, TaskID: task, Node: node, ScheduledAt: at, StartedAt: at, EndedAt: at.Add(time.Millisecond),
		DurationMS: 1, Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, Output: "ok"}
}

func (e *env) stored(id string) *store.Run {
	e.t.Helper()
	r, err := store.GetRun(e.ctx, e.s.Store.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func rejectedIDs(resp protocol.RunsResponse) map[string]string {
	out := map[string]string{}
	for _, r := range resp.Rejected {
		out[r.ID] = r.Error
	}
	return out
}

// One run with binary output must never block the batch: it is stored with
// its odd bytes made visible and the flag set; invalid runs are rejected one
// by one and the good ones stored.
func TestIngestRunsBinaryOutputAndInvalidRuns(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		w1 := e.fakeNode("w1")
		e.storeTask("t1", store.TaskRunning, []string{"w1"}, nil, 0)
		now := time.Now().UTC()

		png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10"
		outputs := map[string]struct {
			in, want string
			binary   bool
		}{
			"plain":   {"all good", "all good", false},
			"unicode": {"héllo ✓ \uFFFD", "héllo ✓ \uFFFD", false},
			"nul":     {"a\x00b", "a\uFFFDb", true},
			"png":     {png, "", true}, // checked below
			"invalid": {"\xff\xfe ok \xc3", "\uFFFD\uFFFD ok \uFFFD", true},
		}
		var batch []protocol.RunReport
		for id, o := range outputs {
			r := report(id, "t1", "w1", now)
			r.Output = o.in
			batch = append(batch, r)
		}
		flagged := report("flagged", "t1", "w1", now)
		flagged.BinaryOutput, flagged.Output = true, "x\uFFFD"
		batch = append(batch, flagged)
		resp, err := e.m.Runs().Ingest(e.ctx, w1, batch)
		if err != nil || resp.Accepted != len(batch) || len(resp.Rejected) != 0 {
			t.Fatalf("batch with binary outputs: %+v %v", resp, err)
		}
		for id, o := range outputs {
			r := e.stored(id)
			if r == nil {
				t.Fatalf("run %s not stored", id)
			}
			if !utf8.ValidString(r.Output) || strings.ContainsRune(r.Output, 0) {
				t.Errorf("run %s: stored output %q is not clean UTF-8", id, r.Output)
			}
			if r.BinaryOutput != o.binary {
				t.Errorf("run %s: binary_output %v, want %v", id, r.BinaryOutput, o.binary)
			}
			if id != "png" && r.Output != o.want {
				t.Errorf("run %s: output %q, want %q", id, r.Output, o.want)
			}
		}
		if r := e.stored("png"); !strings.HasPrefix(r.Output, "\uFFFDPNG\r\n\x1a\n\uFFFD\uFFFD\uFFFD\rIHDR") {
			t.Errorf("png output %q", r.Output)
		}
		if r := e.stored("flagged"); !r.BinaryOutput {
			t.Error("the worker's binary flag was lost")
		}

		// Invalid runs, each rejected with its id; the good ones stored.
		ex := int(1 << 40)
		bad := map[string]func(*protocol.RunReport){
			"future":       func(r *protocol.RunReport) { r.StartedAt, r.EndedAt = now.Add(time.Hour), now.Add(time.Hour) },
			"future-sched": func(r *protocol.RunReport) { r.ScheduledAt = now.Add(10 * time.Minute) },
			"ancient":      func(r *protocol.RunReport) { r.StartedAt = time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC) },
			"negative":     func(r *protocol.RunReport) { r.DurationMS = -5 },
			"exit":         func(r *protocol.RunReport) { r.ExitCode = &ex },
			"status":       func(r *protocol.RunReport) { r.HTTPStatus = 70000 },
			"attempt":      func(r *protocol.RunReport) { r.Attempt = 0 },
			"reversed":     func(r *protocol.RunReport) { r.EndedAt = r.StartedAt.Add(-time.Second) },
			"result":       func(r *protocol.RunReport) { r.Result = "great" },
			"oddtask":      func(r *protocol.RunReport) { r.TaskID = "t1\xff\x00" },
			"longtask":     func(r *protocol.RunReport) { r.TaskID = strings.Repeat("a", 40) },
		}
		batch = []protocol.RunReport{report("good1", "t1", "w1", now)}
		for id, edit := range bad {
			r := report(id, "t1", "w1", now)
			edit(&r)
			batch = append(batch, r)
		}
		oddID := report("r\x00\xff'", "t1", "w1", now)
		// Oversize output (an older worker's encoder makes each odd byte a
		// 3-byte U+FFFD) is cut to its tail, not refused: the run is kept.
		huge := report("huge", "t1", "w1", now)
		huge.Output = strings.Repeat("\xff", protocol.MaxOutputBytes) + "the end"
		batch = append(batch, oddID, huge, report("good2", "t1", "w1", now.Add(time.Second)))
		resp, err = e.m.Runs().Ingest(e.ctx, w1, batch)
		if err != nil {
			t.Fatalf("a batch with invalid runs failed whole: %v", err)
		}
		rej := rejectedIDs(resp)
		if resp.Accepted != 3 || len(resp.Rejected) != len(bad)+1 {
			t.Fatalf("mixed batch: accepted %d, rejected %v", resp.Accepted, rej)
		}
		for id := range bad {
			if rej[id] == "" {
				t.Errorf("run %s was not rejected", id)
			}
			if e.stored(id) != nil {
				t.Errorf("rejected run %s was stored", id)
			}
		}
		if rej[oddID.ID] == "" {
			t.Error("a run id with odd bytes was not rejected")
		}
		if e.stored("good1") == nil || e.stored("good2") == nil {
			t.Error("good runs of a batch with invalid ones were not stored")
		}
		if r := e.stored("huge"); r == nil || !r.BinaryOutput || !strings.HasSuffix(r.Output, "the end") ||
			!strings.HasPrefix(r.Output, "[… ") || len(r.Output) > protocol.MaxOutputBytes+100 || !utf8.ValidString(r.Output) {
			t.Errorf("oversize output not kept as a bounded, valid tail with a notice: %+v", r)
		}
		tk, err := e.m.Tasks().Get(e.ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if tk.LastRunAt == nil || tk.LastRunAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("last run at %v: a rejected future run moved it", tk.LastRunAt)
		}

		// A bogus future last run stored before the fix does not freeze the task.
		if _, err := s.Store.DB.NewUpdate().Model((*store.Task)(nil)).Set("last_run_at = ?", time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)).
			Where("id = ?", "t1").Exec(e.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{report("good3", "t1", "w1", now.Add(2*time.Second))}); err != nil {
			t.Fatal(err)
		}
		tk, _ = e.m.Tasks().Get(e.ctx, "t1")
		if tk.LastRunAt == nil || tk.LastRunAt.Year() == 2100 {
			t.Errorf("last run at %v: still frozen by a future time", tk.LastRunAt)
		}
	})
}

// A node reports only runs of tasks it executes or was sent to run, under
// its own name, at sane times; anything else is rejected, stored nowhere and
// starts no child and no notification. Claims likewise.
func TestIngestRunsAuthorization(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		var hooks sync.Map
		var hits atomic.Int32
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Run struct{ ID string } `json:"run"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			hooks.Store(body.Run.ID, true)
			hits.Add(1)
		}))
		defer recv.Close()
		set, _ := e.m.Settings()
		set.WebhookURL = recv.URL
		if err := e.m.UpdateSettings(e.ctx, set); err != nil {
			t.Fatal(err)
		}
		w1 := e.fakeNode("w1")
		e.fakeNode("w2")
		e.storeTask("child", store.TaskStopped, []string{"w2"}, nil, 0)
		e.storeTask("t1", store.TaskRunning, []string{"w1"}, []string{"child"}, 0)
		e.storeTask("t2", store.TaskRunning, []string{"w2"}, []string{"child"}, 0)
		now := time.Now().UTC()

		forged := []protocol.RunReport{
			report("no-task", "no-such-task", "w1", now),
			report("not-mine", "t2", "w1", now),
			report("other-name", "t1", "w2", now),
			report("future", "t1", "w1", now.Add(6*time.Minute)),
		}
		failedForged := report("not-mine-failed", "t2", "w1", now)
		failedForged.Result = protocol.ResultFailed
		forged = append(forged, failedForged)
		resp, err := e.m.Runs().Ingest(e.ctx, w1, forged)
		if err != nil || resp.Accepted != 0 || len(resp.Rejected) != len(forged) {
			t.Fatalf("forged batch: %+v %v", resp, err)
		}
		for _, r := range forged {
			if e.stored(r.ID) != nil {
				t.Errorf("forged run %s was stored", r.ID)
			}
		}
		rej := rejectedIDs(resp)
		if !strings.Contains(rej["not-mine"], "does not execute") || !strings.Contains(rej["no-task"], "does not exist") {
			t.Errorf("rejections do not say why: %v", rej)
		}

		// The legitimate failed run notifies; the forged one never did.
		ok := report("mine-failed", "t1", "w1", now)
		ok.Result = protocol.ResultFailed
		if resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{ok}); err != nil || resp.Accepted != 1 {
			t.Fatalf("legit failed run: %+v %v", resp, err)
		}
		storetest.Eventually(t, 10*time.Second, func() bool { return hits.Load() >= 1 }, "no webhook for the legitimate failed run")
		if _, forged := hooks.Load("not-mine-failed"); forged || hits.Load() != 1 {
			t.Errorf("webhooks: %d, forged one sent: %v", hits.Load(), forged)
		}
		// The legitimate success starts the child (it fails on the dead
		// worker, which the event log shows); the forged successes did not.
		if resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{report("mine-ok", "t1", "w1", now)}); err != nil || resp.Accepted != 1 {
			t.Fatalf("legit run: %+v %v", resp, err)
		}
		childRuns := func() int {
			evs, _, err := e.m.Reads().ListEvents(e.ctx, store.EventFilter{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ev := range evs {
				if ev.Action == "task.run" && ev.Target == "child" {
					n++
				}
			}
			return n
		}
		storetest.Eventually(t, 10*time.Second, func() bool { return childRuns() >= 1 }, "the legitimate success did not start the child")
		if n := childRuns(); n != 1 {
			t.Errorf("%d child runs attempted, want 1 (forged reports must start none)", n)
		}

		// A run grant (run once, child run) lets w1 report t2.
		if err := store.AddRunGrant(e.ctx, s.Store.DB, "t2", "w1"); err != nil {
			t.Fatal(err)
		}
		if resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{report("granted", "t2", "w1", now)}); err != nil || resp.Accepted != 1 {
			t.Errorf("granted run: %+v %v", resp, err)
		}
		// A deleted task's executor still delivers late runs.
		if err := store.SetTaskStatus(e.ctx, s.Store.DB, "t1", []store.TaskStatus{store.TaskRunning}, store.TaskDeleted); err != nil {
			t.Fatal(err)
		}
		if resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{report("late", "t1", "w1", now)}); err != nil || resp.Accepted != 1 {
			t.Errorf("late run of a deleted task: %+v %v", resp, err)
		}

		// Claims only for tasks the node executes.
		for _, task := range []string{"t2", "no-such-task"} {
			if _, err := e.m.Claim(e.ctx, w1, protocol.ClaimRequest{TaskID: task, FireAt: now.Truncate(time.Second)}); !errors.Is(err, master.ErrForbidden) {
				t.Errorf("claim of %s by w1 = %v, want ErrForbidden", task, err)
			}
		}
	})
}

// An executor removed by an edit may still deliver runs it made before.
func TestEditedAwayExecutorStillReports(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		w1 := e.fakeNode("w1")
		e.fakeNode("w2")
		tk, err := e.m.Tasks().Create(e.ctx, httpInput("w1", "w2"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		in := httpInput("w2")
		if _, err := e.m.Tasks().Update(e.ctx, tk.ID, in); err != nil {
			t.Fatal(err)
		}
		resp, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{report("before-edit", tk.ID, "w1", time.Now())})
		if err != nil || resp.Accepted != 1 {
			t.Fatalf("run of a former executor: %+v %v", resp, err)
		}
	})
}

// Run once records a grant before it sends the task to the node.
func TestRunTaskRecordsGrant(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		runningWorkers(e, "w1")
		tk, err := e.m.Tasks().Create(e.ctx, httpInput("w1"), "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, node, err := e.m.Tasks().Run(e.ctx, tk.ID); err != nil || node != "w1" {
			t.Fatalf("RunTask: %s %v", node, err)
		}
		n, err := e.s.Store.DB.NewSelect().Model((*store.RunGrant)(nil)).Where("task_id = ?", tk.ID).Where("node = ?", "w1").Count(e.ctx)
		if err != nil || n != 1 {
			t.Fatalf("run grants of %s: %d %v", tk.ID, n, err)
		}
	})
}

// Identity: the cluster key lets a new machine join under a new name, never
// take over another's.
func TestRegisterNodeIdentity(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		e.addMasterNode()
		now := time.Now()
		req := func(name, host string) protocol.RegisterRequest {
			return protocol.RegisterRequest{
				Node:   protocol.NodeConfig{Name: name, Protocol: "http", Host: host, Priority: 1, MaxConcurrency: 5},
				Secret: protocol.NewSecret(), BootID: protocol.NewNonce(), MachineName: "box",
			}
		}
		newKey := func() ed25519.PrivateKey {
			_, k, err := ed25519.GenerateKey(nil)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		register := func(k ed25519.PrivateKey, r protocol.RegisterRequest) error {
			h, b := signedRegistrationWith(t, clusterKey, k, r, now)
			_, err := e.m.Register(e.ctx, h, b)
			return err
		}

		// A manual node (created by an admin) cannot be taken over.
		if _, err := e.m.Nodes().Create(e.ctx, protocol.NodeConfig{Name: "w2", Protocol: "http", Host: "127.0.0.1:30002", Priority: 1, MaxConcurrency: 1}); err != nil {
			t.Fatal(err)
		}
		before := e.snapshot("w2")
		if err := register(newKey(), req("w2", "10.9.9.9:1")); !errors.Is(err, master.ErrState) {
			t.Errorf("registration over a manual node = %v, want ErrState", err)
		}
		if after := e.snapshot("w2"); after != before {
			t.Errorf("the manual node changed:\n%s\n%s", before, after)
		}

		// An auto node binds its key on first use and re-registers with it.
		k1 := newKey()
		if err := register(k1, req("w1", "127.0.0.1:30001")); err != nil {
			t.Fatalf("first registration: %v", err)
		}
		if n := e.node("w1"); n.NodeKey == "" || n.Mode != store.ModeAuto {
			t.Fatalf("after first registration: %+v", n)
		}
		if err := register(k1, req("w1", "127.0.0.1:30011")); err != nil {
			t.Fatalf("re-registration with the node's key: %v", err)
		}
		if n := e.node("w1"); n.Host != "127.0.0.1:30011" {
			t.Errorf("re-registration did not update the host: %+v", n)
		}

		// Another machine's key for the same name is refused and changes nothing.
		before = e.snapshot("w1")
		err := register(newKey(), req("w1", "10.6.6.6:1"))
		if !errors.Is(err, master.ErrState) || !strings.Contains(err.Error(), "reset its identity") {
			t.Errorf("takeover with another key = %v, want ErrState naming reset identity", err)
		}
		if after := e.snapshot("w1"); after != before {
			t.Errorf("a refused takeover changed the node:\n%s\n%s", before, after)
		}

		// Names differing only in case, and the master's name in any case.
		for _, name := range []string{"W1", "MASTER", "Master"} {
			if err := register(newKey(), req(name, "10.1.1.1:1")); err == nil {
				t.Errorf("registration as %q accepted", name)
			}
		}
		if e.countNodes() != 3 {
			t.Errorf("%d nodes, want master, w1, w2", e.countNodes())
		}

		// The node signature must match the key the body presents.
		r := req("w5", "127.0.0.1:30005")
		h, b := signedRegistrationWith(t, clusterKey, newKey(), r, now)
		other, _ := signedRegistrationWith(t, clusterKey, newKey(), r, now)
		h.NodeSignature = other.NodeSignature
		if _, err := e.m.Register(e.ctx, h, b); !errors.Is(err, master.ErrUnauthorized) {
			t.Errorf("signature by another key = %v, want ErrUnauthorized", err)
		}
		h, b = signedRegistrationWith(t, clusterKey, newKey(), r, now)
		h.NodeSignature = ""
		if _, err := e.m.Register(e.ctx, h, b); !errors.Is(err, master.ErrUnauthorized) {
			t.Errorf("no node signature = %v, want ErrUnauthorized", err)
		}
		// Unknown fields are refused.
		k5 := newKey()
		h, b = signedRegistrationWith(t, clusterKey, k5, r, now)
		b = []byte(strings.Replace(string(b), `{"node":`, `{"mode":"manual","node":`, 1))
		h, b = resign(t, k5, h, b)
		if _, err := e.m.Register(e.ctx, h, b); !errors.Is(err, master.ErrInvalid) {
			t.Errorf("unknown field = %v, want ErrInvalid", err)
		}

		// Reset identity lets a replaced machine register the name.
		ctx := master.WithActor(e.ctx, "admin")
		n, err := e.m.Nodes().ResetIdentity(ctx, "w1")
		if err != nil || n.NodeKey != "" {
			t.Fatalf("ResetIdentity: %+v %v", n, err)
		}
		k2 := newKey()
		if err := register(k2, req("w1", "127.0.0.1:30021")); err != nil {
			t.Fatalf("registration after reset: %v", err)
		}
		if err := register(k1, req("w1", "127.0.0.1:30001")); !errors.Is(err, master.ErrState) {
			t.Errorf("the old key after reset = %v, want ErrState", err)
		}
		evs, _, _ := e.m.Reads().ListEvents(e.ctx, store.EventFilter{Limit: 100})
		found := false
		for _, ev := range evs {
			found = found || (ev.Action == "node.reset_identity" && ev.Target == "w1" && ev.Actor == "admin" && ev.Outcome == store.OutcomeOK)
		}
		if !found {
			t.Error("no node.reset_identity event by admin")
		}
		if _, err := e.m.Nodes().ResetIdentity(ctx, "nobody"); !errors.Is(err, master.ErrNotFound) {
			t.Errorf("reset of an unknown node = %v", err)
		}
	})
}

// resign signs body again as a worker would (the cluster MAC and node key).
func resign(t *testing.T, k ed25519.PrivateKey, h master.RegisterHeaders, body []byte) (master.RegisterHeaders, []byte) {
	t.Helper()
	h.Nonce = protocol.NewNonce()
	h.Signature = protocol.RegisterMAC(clusterKey, h.Node, h.Timestamp, h.Nonce, body)
	h.NodeSignature = protocol.SignRegistration(k, h.Node, h.Timestamp, h.Nonce, body)
	return h, body
}

// masterGoroutines lists the goroutines running code of package master.
func masterGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "schedulemaster/master.(") || strings.Contains(g, "schedulemaster/master.glob") {
			out = append(out, g)
		}
	}
	return out
}

// Stop cancels the background work (a hung webhook, a child run stuck on a
// hung worker, health sweeps) and returns only after all of it has ended, so
// the caller can close the database at once.
func TestStopWaitsForBackgroundWork(t *testing.T) {
	// Not parallel: it counts every goroutine of the master package in the
	// process, so a parallel test's running master (seen once in CI, beside
	// a workflow test) would count as this one's leak.
	s := storetest.OpenSQLite(t)
	e := newEnv(t, s, func(c *master.Config) { c.CallTimeout = time.Minute })
	release := make(chan struct{})
	var webhooks, workerCalls atomic.Int32
	hang := func(n *atomic.Int32) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
	}
	hook := httptest.NewServer(hang(&webhooks))
	t.Cleanup(hook.Close)
	hungWorker := httptest.NewServer(hang(&workerCalls))
	t.Cleanup(hungWorker.Close)
	t.Cleanup(func() { close(release) }) // first, so the servers can close

	set, _ := e.m.Settings()
	set.WebhookURL = hook.URL
	if err := e.m.UpdateSettings(e.ctx, set); err != nil {
		t.Fatal(err)
	}
	w1 := e.fakeNode("w1")
	hung := &store.Node{Name: "hung", Type: store.TypeWorker, Protocol: "http", Host: hungWorker.Listener.Addr().String(),
		Status: store.StatusRunning, DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto, Secret: protocol.NewSecret()}
	if err := store.CreateNode(e.ctx, s.Store.DB, hung); err != nil {
		t.Fatal(err)
	}
	e.storeTask("child", store.TaskStopped, []string{"hung"}, nil, 0)
	e.storeTask("parent", store.TaskRunning, []string{"w1"}, []string{"child"}, 0)
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	var batch []protocol.RunReport
	for i := range 1100 {
		r := report("fail-"+strconv.Itoa(i), "parent", "w1", now)
		r.Result = protocol.ResultFailed
		batch = append(batch, r)
	}
	for len(batch) > 0 {
		part := batch[:min(len(batch), master.MaxRunsPerBatch)]
		batch = batch[len(part):]
		if _, err := e.m.Runs().Ingest(e.ctx, w1, part); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.m.Runs().Ingest(e.ctx, w1, []protocol.RunReport{report("ok", "parent", "w1", now)}); err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, 30*time.Second, func() bool { return webhooks.Load() >= 1 && workerCalls.Load() >= 1 },
		"the webhook (%d calls) and the child run (%d calls) did not start", webhooks.Load(), workerCalls.Load())
	// One notification hangs at the webhook, its destination's queue is
	// full, the rest were dropped (counted).
	storetest.Eventually(t, 30*time.Second, func() bool { return e.m.NotificationsDropped() >= 1 },
		"no notification was dropped: the queues have no bound?")
	if d := e.m.NotificationsDropped(); d > 1100 {
		t.Errorf("dropped notifications = %d, more than the 1,100 failures", d)
	}
	if len(masterGoroutines()) == 0 {
		t.Fatal("no background goroutine of the master is running before Stop: the test proves nothing")
	}

	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e.m.Stop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return: it waits for work it did not cancel")
	}
	// A goroutine may still be returning after it signalled its end: allow
	// it a moment, no more.
	var left []string
	deadline := time.Now().Add(time.Second)
	for left = masterGoroutines(); len(left) > 0 && time.Now().Before(deadline); left = masterGoroutines() {
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("%d goroutines of the master outlived Stop:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	// Nothing may touch the database now.
	if err := s.Store.Close(); err != nil {
		t.Fatal(err)
	}
}
