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

// stepTarget answers the steps' requests: by path, a status and a body,
// and records when each request came and ended.
type stepTarget struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	started map[string]time.Time
	ended   map[string]time.Time
	answer  map[string]func(w http.ResponseWriter, r *http.Request)
}

func newStepTarget(t *testing.T) *stepTarget {
	st := &stepTarget{hits: map[string]int{}, started: map[string]time.Time{}, ended: map[string]time.Time{},
		answer: map[string]func(http.ResponseWriter, *http.Request){}}
	st.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.hits[r.URL.Path]++
		st.started[r.URL.Path] = time.Now()
		answer := st.answer[r.URL.Path]
		st.mu.Unlock()
		if answer != nil {
			answer(w, r)
		} else {
			_, _ = w.Write([]byte("ok " + r.URL.Path + "\n"))
		}
		st.mu.Lock()
		st.ended[r.URL.Path] = time.Now()
		st.mu.Unlock()
	}))
	t.Cleanup(st.Close)
	return st
}

func (st *stepTarget) on(path string, answer func(http.ResponseWriter, *http.Request)) {
	st.mu.Lock()
	st.answer[path] = answer
	st.mu.Unlock()
}

func (st *stepTarget) count(path string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hits[path]
}

// stepTask creates a stopped HTTP task on w1 requesting the target's path.
func stepTask(t *testing.T, e *env, target *stepTarget, path string) string {
	t.Helper()
	in := httpInput("w1")
	in.Title = "step " + path
	in.HTTP.URL = target.URL + path
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// waitWorkflowRun polls a workflow run until it ended.
func waitWorkflowRun(t *testing.T, e *env, id string) *master.WorkflowRun {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := e.m.Workflows().Run(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != store.WorkflowRunning {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow run %s still running after 30s: %+v", id, r.Steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stepStates(r *master.WorkflowRun) map[string]string {
	out := map[string]string{}
	for _, s := range r.Steps {
		out[s.Name] = s.State
	}
	return out
}

// TestWorkflowDiamondRunsEachStepOnce: A, then B and C (fan-out), then D
// once both ended (fan-in): every step ran once, on a real worker, D after
// both B and C ended, and each step's run is an ordinary run of its task
// that names the workflow run and step.
func TestWorkflowDiamondRunsEachStepOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1")
	target := newStepTarget(t)
	target.on("/b", func(w http.ResponseWriter, r *http.Request) { time.Sleep(300 * time.Millisecond) })
	ids := map[string]string{}
	for _, p := range []string{"a", "b", "c", "d"} {
		ids[p] = stepTask(t, e, target, "/"+p)
	}
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "diamond", Steps: []master.WorkflowStep{
		{Name: "a", Task: ids["a"]},
		{Name: "b", Task: ids["b"], After: []master.StepEdge{{Step: "a"}}},
		{Name: "c", Task: ids["c"], After: []master.StepEdge{{Step: "a"}}},
		{Name: "d", Task: ids["d"], After: []master.StepEdge{{Step: "b"}, {Step: "c", On: master.OnSuccess}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := waitWorkflowRun(t, e, started.ID)
	if r.Status != store.WorkflowSuccess {
		t.Fatalf("diamond ended %s: %+v", r.Status, r.Steps)
	}
	for _, p := range []string{"a", "b", "c", "d"} {
		if n := target.count("/" + p); n != 1 {
			t.Errorf("step %s ran %d times", p, n)
		}
	}
	target.mu.Lock()
	if !target.started["/d"].After(target.ended["/b"]) || !target.started["/d"].After(target.ended["/c"]) {
		t.Errorf("d started at %s, before b (%s) or c (%s) ended", target.started["/d"], target.ended["/b"], target.ended["/c"])
	}
	target.mu.Unlock()
	for _, s := range r.Steps {
		if s.State != store.StepSuccess || s.Run == "" {
			t.Fatalf("step %+v", s)
		}
		run, err := e.m.Runs().Get(e.ctx, s.Run)
		if err != nil || run.WorkflowRun != r.ID || run.WorkflowStep != s.Name || run.TaskID != s.TaskID || run.Result != string(protocol.ResultSuccess) {
			t.Fatalf("the run of step %s: %+v (%v)", s.Name, run, err)
		}
	}
}

// TestWorkflowFailurePathRunsTheFailureStep: A fails, so B (on success) is
// skipped, C (on failure) runs, D (always, after B) runs though B was
// skipped, and the run is failed.
func TestWorkflowFailurePathRunsTheFailureStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1")
	target := newStepTarget(t)
	target.on("/a", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "broken", http.StatusInternalServerError) })
	ids := map[string]string{}
	for _, p := range []string{"a", "b", "c", "d"} {
		ids[p] = stepTask(t, e, target, "/"+p)
	}
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "failure path", Steps: []master.WorkflowStep{
		{Name: "a", Task: ids["a"]},
		{Name: "b", Task: ids["b"], After: []master.StepEdge{{Step: "a"}}},
		{Name: "c", Task: ids["c"], After: []master.StepEdge{{Step: "a", On: master.OnFailure}}},
		{Name: "d", Task: ids["d"], After: []master.StepEdge{{Step: "b", On: master.OnAlways}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := waitWorkflowRun(t, e, started.ID)
	want := map[string]string{"a": store.StepFailed, "b": store.StepSkipped, "c": store.StepSuccess, "d": store.StepSuccess}
	if got := stepStates(r); r.Status != store.WorkflowFailed || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("run %s with steps %v, want failed with %v", r.Status, got, want)
	}
	if target.count("/b") != 0 || target.count("/c") != 1 || target.count("/d") != 1 {
		t.Fatalf("requests: b %d, c %d, d %d", target.count("/b"), target.count("/c"), target.count("/d"))
	}
}

// TestWorkflowParamsFromAParentsJSONAnswer: a step's param takes a field
// of its parent's JSON answer and the run's logical time and id; the
// child's request carries them.
func TestWorkflowParamsFromAParentsJSONAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1")
	target := newStepTarget(t)
	target.on("/extract", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"batch_id":"b-42","rows":7}`))
	})
	var got string
	target.on("/load", func(w http.ResponseWriter, r *http.Request) {
		target.mu.Lock()
		got = r.URL.RawQuery
		target.mu.Unlock()
	})
	extract := stepTask(t, e, target, "/extract")
	in := httpInput("w1")
	in.Title = "load"
	in.HTTP.URL = target.URL + "/load?batch={{batch}}&rows={{rows}}&run={{WORKFLOW_RUN_ID}}"
	in.Params = map[string]string{"batch": "none", "rows": "0"}
	load, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "etl", Steps: []master.WorkflowStep{
		{Name: "extract", Task: extract},
		{Name: "load", Task: load.ID, After: []master.StepEdge{{Step: "extract"}},
			Params: map[string]string{"batch": "{{steps.extract.json.batch_id}}", "rows": "{{steps.extract.json.rows}}"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := waitWorkflowRun(t, e, started.ID); r.Status != store.WorkflowSuccess {
		t.Fatalf("run %s: %+v", r.Status, r.Steps)
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if want := "batch=b-42&rows=7&run=" + started.ID; got != want {
		t.Fatalf("load requested with %q, want %q", got, want)
	}
}

// TestWorkflowCancelKillsTheStepInProgress: cancelling a run kills its
// step in progress on the worker and skips the rest.
func TestWorkflowCancelKillsTheStepInProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1")
	target := newStepTarget(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	target.on("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	slow := stepTask(t, e, target, "/slow")
	next := stepTask(t, e, target, "/next")
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "long", Steps: []master.WorkflowStep{
		{Name: "slow", Task: slow},
		{Name: "next", Task: next, After: []master.StepEdge{{Step: "slow", On: master.OnAlways}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for target.count("/slow") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow step never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.m.Workflows().Cancel(e.ctx, started.ID); err != nil {
		t.Fatal(err)
	}
	r, err := e.m.Workflows().Run(e.ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := stepStates(r); r.Status != store.WorkflowCancelled || got["slow"] != store.StepKilled || got["next"] != store.StepSkipped {
		t.Fatalf("after cancel: %s %v", r.Status, got)
	}
	// The worker killed the request: its run ends killed.
	slowRun := r.Steps[0].Run
	for {
		run, err := e.m.Runs().Get(e.ctx, slowRun)
		if err == nil && run.Result == string(protocol.ResultKilled) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow step's run: %+v (%v), want killed", run, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if target.count("/next") != 0 {
		t.Fatal("a step after the cancel ran")
	}
	if err := e.m.Workflows().Cancel(e.ctx, started.ID); master.KindOf(err) != master.KindState {
		t.Fatalf("cancel of a cancelled run: %v", err)
	}
}

// TestWorkflowDefinitionRefusesBadGraphs: each bad definition is refused
// with a field error naming the step, and nothing is saved.
func TestWorkflowDefinitionRefusesBadGraphs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runningWorkers(e, "w1")
	a := mustTask(t, e, "a")
	b := mustTask(t, e, "b")
	foreign := httpInput("w1")
	foreign.Title, foreign.Project = "elsewhere", "other"
	if _, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "other", Pools: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	ft, err := e.m.Tasks().Create(e.ctx, foreign, "admin")
	if err != nil {
		t.Fatal(err)
	}
	step := func(name, task string, after ...master.StepEdge) master.WorkflowStep {
		return master.WorkflowStep{Name: name, Task: task, After: after}
	}
	on := func(s, c string) master.StepEdge { return master.StepEdge{Step: s, On: c} }
	many := make([]master.WorkflowStep, master.MaxWorkflowSteps+1)
	for i := range many {
		many[i] = step(fmt.Sprintf("s%d", i), a)
	}
	for _, c := range []struct {
		name  string
		steps []master.WorkflowStep
		field string
		says  string
	}{
		{"no steps", nil, "steps", "at least one step"},
		{"too many", many, "steps", "at most 500"},
		{"duplicate", []master.WorkflowStep{step("x", a), step("x", b)}, "steps[1].name", "steps[0] already"},
		{"bad name", []master.WorkflowStep{step("1x", a)}, "steps[0].name", "letters"},
		{"unknown task", []master.WorkflowStep{step("x", "no-such-task")}, "steps[0].task", "does not exist"},
		{"foreign task", []master.WorkflowStep{step("x", ft.ID)}, "steps[0].task", "this workflow's project"},
		{"unknown parent", []master.WorkflowStep{step("x", a, on("y", ""))}, "steps[0].after[0]", `no step is named "y"`},
		{"self", []master.WorkflowStep{step("x", a, on("x", ""))}, "steps[0].after[0]", "waits for itself"},
		{"bad condition", []master.WorkflowStep{step("x", a), step("y", b, on("x", "sometimes"))}, "steps[1].after[0].on", "success, failure or always"},
		{"cycle", []master.WorkflowStep{step("x", a, on("z", "")), step("y", a, on("x", "")), step("z", b, on("y", ""))}, "after", "cycle: "},
		{"never", []master.WorkflowStep{step("x", a), step("y", b, on("x", "")), step("z", a, on("x", "failure"), on("y", ""))},
			"steps[2].after", `can never run: it needs step "x" to both succeed and fail`},
	} {
		_, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: c.name, Steps: c.steps}})
		fe, ok := err.(protocol.FieldErrors)
		if !ok {
			t.Fatalf("%s: %v, want field errors", c.name, err)
		}
		found := false
		for field, msg := range fe {
			if strings.HasSuffix(field, c.field) && strings.Contains(msg, c.says) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %v, want %s saying %q", c.name, fe, c.field, c.says)
		}
	}
	// The cycle is named in running order.
	_, err = e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "cycle", Steps: []master.WorkflowStep{
		step("x", a, on("z", "")), step("y", a, on("x", "")), step("z", b, on("y", ""))}}})
	if msg := fmt.Sprint(err); !strings.Contains(msg, "x → y → z → x") && !strings.Contains(msg, "y → z → x → y") && !strings.Contains(msg, "z → x → y → z") {
		t.Fatalf("cycle named as %s", msg)
	}
	if ws, err := e.m.Workflows().List(e.ctx, ""); err != nil || len(ws) != 0 {
		t.Fatalf("refused definitions were saved: %v %+v", err, ws)
	}
	// A key names one workflow of a project; its own edit keeps it.
	first, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "etl", Key: "etl", Steps: []master.WorkflowStep{step("x", a)}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "etl 2", Key: "etl", Steps: []master.WorkflowStep{step("x", a)}}})
	if fe, ok := err.(protocol.FieldErrors); !ok || !strings.Contains(fe["key"], "has this key already") {
		t.Fatalf("a second workflow with key etl: %v", err)
	}
	if _, err := e.m.Workflows().Update(e.ctx, first.ID, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "etl b", Key: "etl", Steps: []master.WorkflowStep{step("x", b)}}}); err != nil {
		t.Fatalf("an edit keeping its own key: %v", err)
	}
}

func mustTask(t *testing.T, e *env, title string) string {
	t.Helper()
	in := httpInput("w1")
	in.Title = title
	tk, err := e.m.Tasks().Create(e.ctx, in, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// TestWorkflowRerunFailedKeepsTheSuccessfulSteps: a run whose middle step
// failed is run again as a new run of the same logical time: the step
// that succeeded is kept (not requested again), the failed one and the
// step after it run, and the new run names the old one.
func TestWorkflowRerunFailedKeepsTheSuccessfulSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	url := e.serveMaster()
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	reportingWorkers(e, url, "w1")
	target := newStepTarget(t)
	target.on("/b", func(w http.ResponseWriter, r *http.Request) {
		if target.count("/b") == 1 {
			http.Error(w, "first time broken", http.StatusInternalServerError)
		}
	})
	ids := map[string]string{}
	for _, p := range []string{"a", "b", "c"} {
		ids[p] = stepTask(t, e, target, "/"+p)
	}
	w, err := e.m.Workflows().Create(e.ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{Title: "flaky middle", Steps: []master.WorkflowStep{
		{Name: "a", Task: ids["a"]},
		{Name: "b", Task: ids["b"], After: []master.StepEdge{{Step: "a"}}},
		{Name: "c", Task: ids["c"], After: []master.StepEdge{{Step: "b"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	started, err := e.m.Workflows().RunNow(e.ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := waitWorkflowRun(t, e, started.ID)
	if got := stepStates(first); first.Status != store.WorkflowFailed || got["a"] != store.StepSuccess || got["b"] != store.StepFailed || got["c"] != store.StepSkipped {
		t.Fatalf("first run %s: %v", first.Status, got)
	}
	if _, err := e.m.Workflows().RerunFailed(e.ctx, w.ID); master.KindOf(err) != master.KindNotFound {
		t.Fatalf("rerun of a workflow's id, not a run's: %v", err)
	}
	again, err := e.m.Workflows().RerunFailed(e.ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	second := waitWorkflowRun(t, e, again.ID)
	if second.Status != store.WorkflowSuccess || second.RerunOf != first.ID || !second.LogicalTime.Equal(first.LogicalTime) || second.ID == first.ID {
		t.Fatalf("rerun: %+v", second)
	}
	if target.count("/a") != 1 || target.count("/b") != 2 || target.count("/c") != 1 {
		t.Fatalf("requests: a %d, b %d, c %d; want a kept (1), b again (2), c once", target.count("/a"), target.count("/b"), target.count("/c"))
	}
	if second.Steps[0].Run != first.Steps[0].Run {
		t.Fatalf("the kept step a names run %s, was %s", second.Steps[0].Run, first.Steps[0].Run)
	}
	if _, err := e.m.Workflows().RerunFailed(e.ctx, second.ID); master.KindOf(err) != master.KindState {
		t.Fatalf("rerun of a successful run: %v", err)
	}
}
