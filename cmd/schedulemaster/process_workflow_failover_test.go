package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// One workflow run across three masters on one database, the leader killed
// (kill -9) three times during the run; every step must run exactly once
// and the run must finish.
//
// One run is killed three times rather than three runs killed once: each
// kill then lands on a run already carried over by an earlier failover, and
// the last part of the run is finished by restarted masters only, which is
// the "a master restart resumes runs in progress" rule.
//
// The DAG fans out and in twice:
//
//	a → b, c, d → e → f, g, h → i
//
// The target holds some steps' answers until the test lets them go, so the
// kills land where they are meant to, not where the clock happens to put
// them. The steps' tasks route "failover" (the highest priority running
// executor); raising the priority of the worker that lists the leader first
// (and uses it: a worker sticks to a master until it fails) puts the step
// runs, and so their reports, on the leader, the master about to die.
//
// The kill points:
//
//  1. a's request reaches the target: the leader L1 started the run (the
//     POST went to it) and has just sent the first step, perhaps without
//     answering the POST. a's report, meant for L1, goes to another master,
//     which sends b, c, d.
//  2. b, c and d run on the worker of the second leader L2 (all three
//     requests held at the target): L2 is killed with three steps in flight,
//     their reports go to another master, and the last of them sends e (the
//     fan-in).
//  3. e ran on the worker of L3 and its report went to L3, which sends f,
//     g and h: L3 is killed the moment the first of them reaches the target,
//     in the middle of sending its siblings. Each sibling is then pending
//     (another master's advance or the next leader's reconcile sends it),
//     dispatched but unsent (the next leader sends it again after
//     resendAfter, 30 s, to the same worker, which starts it once: the
//     test then takes that much longer) or sent.
//
// L1 is restarted after the second kill and L2 before the third (each on its
// address and data dir), so that the second and third kills hit a master
// that never died (its worker still uses it); L3 is restarted after the
// third. The run then ends on restarted masters.
func TestWorkflowSurvivesLeaderKillOnMariaDB(t *testing.T) {
	t.Parallel()
	testWorkflowLeaderKills(t, storetest.FreshDSN(t, "mysql")) // skips without SM_TEST_MYSQL_DSN, fails with SM_TEST_REQUIRE_ALL=1
}

// TestWorkflowSurvivesLeaderKillOnPostgreSQL is the same on one PostgreSQL
// database.
func TestWorkflowSurvivesLeaderKillOnPostgreSQL(t *testing.T) {
	t.Parallel()
	testWorkflowLeaderKills(t, storetest.FreshDSN(t, "postgres")) // skips without SM_TEST_PG_DSN, fails with SM_TEST_REQUIRE_ALL=1
}

// wfStep is a step of the test's DAG: its name and parents.
type wfStep struct {
	name  string
	after []string
}

var failoverDAG = []wfStep{
	{"a", nil},
	{"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"a"}},
	{"e", []string{"b", "c", "d"}},
	{"f", []string{"e"}}, {"g", []string{"e"}}, {"h", []string{"e"}},
	{"i", []string{"f", "g", "h"}},
}

// wfStepRunJSON and wfRunJSON are GET /api/v1/workflow-runs/{id}.
type wfStepRunJSON struct {
	Name    string `json:"name"`
	TaskID  string `json:"task_id"`
	State   string `json:"state"`
	Run     string `json:"run"`
	Node    string `json:"node"`
	Attempt int    `json:"attempt"`
}

type wfRunJSON struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Steps  []wfStepRunJSON `json:"steps"`
}

func testWorkflowLeaderKills(t *testing.T, dsn string) {
	ids := []string{"m1", "m2", "m3"}
	masters := map[string]*masterProc{}
	// Every process a master ran as, the dead ones too: their logs say
	// which master sent which step.
	var all []*masterProc
	for _, id := range ids { // one after the other: the first one migrates
		masters[id] = startMaster(t, "", "--db", dsn, "--identity", id)
		all = append(all, masters[id])
	}
	// restart starts a killed master again under its identity, once the
	// live master via has marked it offline: until then its heartbeat is
	// recent and a master under its identity is refused (a live twin).
	restart := func(id string, via *masterProc) {
		via.waitNode(id, 30*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
		old := masters[id]
		masters[id] = startMaster(t, old.DataDir, "--db", dsn, "--identity", id, "--listen", strings.TrimPrefix(old.URL, "http://"))
		all = append(all, masters[id])
	}
	others := func(dead ...string) map[string]*masterProc {
		out := map[string]*masterProc{}
		for id, m := range masters {
			out[id] = m
		}
		for _, id := range dead {
			delete(out, id)
		}
		return out
	}

	// One worker per master, listing that master first: workerOf[id] uses
	// id until id fails.
	workerOf := map[string]string{}
	for i, id := range ids {
		var urls []string
		for j := range ids {
			urls = append(urls, masters[ids[(i+j)%len(ids)]].URL)
		}
		workerOf[id] = "w-" + id
		startClusterWorker(t, strings.Join(urls, ","), workerOf[id])
	}
	L1 := waitOneLeader(t, masters, 30*time.Second)
	var obs *masterProc // a master that is not about to be killed: the test's view
	for id, m := range masters {
		if id != L1 {
			obs = m
		}
	}
	for _, id := range ids {
		obs.waitNode(workerOf[id], 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}
	prefer := func(on *masterProc, leader, before string) {
		t.Helper()
		if before != "" {
			on.setPriority(workerOf[before], "1")
		}
		on.setPriority(workerOf[leader], "100")
	}
	prefer(obs, L1, "")

	tg := newWorkflowTarget(t)
	executors := `["` + workerOf["m1"] + `","` + workerOf["m2"] + `","` + workerOf["m3"] + `"]`
	taskOf := map[string]string{}
	var steps []string
	for _, s := range failoverDAG {
		// A stopped task: it runs only when the workflow sends it.
		tk := obs.createTask(`{"title":"workflow step ` + s.name + `","type":"http","schedule":{"kind":"interval","every":"1h"},
			"http":{"url":"` + tg.URL + `/hit/` + s.name + `"},"timeout":"90s","routing":"failover","executors":` + executors + `}`)
		taskOf[s.name] = tk.ID
		var after []string
		for _, p := range s.after {
			after = append(after, `{"step":"`+p+`","on":"success"}`)
		}
		steps = append(steps, `{"name":"`+s.name+`","task":"`+tk.ID+`","after":[`+strings.Join(after, ",")+`]}`)
	}
	st, body := obs.api("POST", "/api/v1/workflows", `{"title":"leader kills","steps":[`+strings.Join(steps, ",")+`]}`)
	if st != http.StatusCreated {
		t.Fatalf("create workflow: %d %s", st, body)
	}
	var wf struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &wf); err != nil {
		t.Fatal(err)
	}

	// Kill 1: the leader dies as its first step reaches the target (the
	// target's handler kills it before it answers the step).
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		tg.hold(s)
	}
	killL1 := masters[L1]
	tg.onFirstHit(func() { killL1.kill() }, "a")
	go func() {
		// The answer may never come: the master dies while it runs this.
		resp, err := killL1.client.Post(killL1.URL+"/api/v1/workflows/"+wf.ID+"/run", "application/json", strings.NewReader(`{"params":{}}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 30*time.Second, "step a reaching the target", func() bool { return tg.count("a") == 1 })
	<-killL1.done
	runID := workflowRunOf(t, obs, wf.ID)
	L2 := waitOneLeader(t, others(L1), 30*time.Second)
	t.Logf("kill 1: %s killed as step a started; %s leads; run %s", L1, L2, runID)
	prefer(obs, L2, L1)
	tg.release("a")

	// Kill 2: the leader dies while b, c and d run on its worker.
	waitFor(t, 30*time.Second, "steps b, c and d reaching the target", func() bool {
		return tg.count("b") == 1 && tg.count("c") == 1 && tg.count("d") == 1
	})
	var Z string // the master neither L1 nor L2: the third leader
	for _, id := range ids {
		if id != L1 && id != L2 {
			Z = id
		}
	}
	obs = masters[Z]
	masters[L2].kill()
	L3 := waitOneLeader(t, map[string]*masterProc{Z: masters[Z]}, 30*time.Second)
	t.Logf("kill 2: %s killed with b, c, d in flight; %s leads", L2, L3)
	prefer(obs, L3, L2)
	restart(L1, masters[L3])
	obs = masters[L1]
	tg.release("b", "c", "d")

	// Kill 3: e ends on L3's worker, which reports it to L3; L3 sends f, g
	// and h and dies as the first one reaches the target.
	waitFor(t, 30*time.Second, "step e reaching the target", func() bool { return tg.count("e") == 1 })
	restart(L2, masters[L3])
	killL3 := masters[L3]
	killed3 := make(chan struct{})
	tg.onFirstHit(func() { killL3.kill(); close(killed3) }, "f", "g", "h")
	tg.release("e")
	select {
	case <-killed3:
	case <-time.After(60 * time.Second):
		t.Fatal("none of f, g, h reached the target within 60s of e's release")
	}
	t.Logf("kill 3: %s killed as its first child of e started; steps then %s", L3, stepStatesOf(wfRun(t, obs, runID)))
	L4 := waitOneLeader(t, others(L3), 30*time.Second)
	restart(L3, masters[L4])
	t.Logf("%s leads; %s restarted", L4, L3)

	// The run ends, each step run once: one target hit, one run of its task
	// (the run the step names), successful.
	var run wfRunJSON
	waitFor(t, 120*time.Second, "the workflow run ending", func() bool {
		run = wfRun(t, obs, runID)
		return run.Status != "running"
	})
	if len(run.Steps) != len(failoverDAG) {
		t.Fatalf("workflow run has %d steps, want %d: %s", len(run.Steps), len(failoverDAG), stepStatesOf(run))
	}
	if run.Status != "success" {
		t.Errorf("workflow run ended %s: %s", run.Status, stepStatesOf(run))
	}
	runsOf := settleSteps(t, obs, tg, taskOf)
	for _, s := range run.Steps {
		runs := runsOf[s.Name]
		var runIDs []string
		for _, r := range runs {
			runIDs = append(runIDs, r.ID+" "+r.Result)
		}
		if hits := tg.count(s.Name); hits != 1 || len(runs) != 1 || runs[0].ID != s.Run || runs[0].Result != "success" || s.State != "success" {
			t.Errorf("step %s (%s, run %s on %s): %d target hits, runs %v; want one hit and its one successful run",
				s.Name, s.State, s.Run, s.Node, hits, runIDs)
		}
	}
	// Where the kills landed, as the masters' logs tell it.
	sent := regexp.MustCompile(`msg="workflow step sent" run=\S+ step=(\S+) .*node=(\S+)`)
	senders := map[string][]string{}
	for _, m := range all {
		for _, l := range m.snapshot() {
			if s := sent.FindStringSubmatch(l); s != nil {
				senders[s[1]] = append(senders[s[1]], fmt.Sprintf("%s→%s", m.identity(), s[2]))
			}
		}
	}
	var lines []string
	for _, s := range failoverDAG {
		lines = append(lines, fmt.Sprintf("%s: %v", s.name, senders[s.name]))
	}
	t.Logf("steps sent (master→worker): %s", strings.Join(lines, "; "))
}

// identity is the --identity a master was started with.
func (m *masterProc) identity() string {
	id := ""
	for i, a := range m.cmd.Args[:len(m.cmd.Args)-1] {
		if a == "--identity" {
			id = m.cmd.Args[i+1]
		}
	}
	return id
}

// workflowRunOf waits for the workflow's one run and returns its id.
func workflowRunOf(t *testing.T, m *masterProc, workflowID string) string {
	t.Helper()
	var id string
	waitFor(t, 20*time.Second, "the workflow's run listed", func() bool {
		st, body := m.api("GET", "/api/v1/workflows/"+workflowID+"/runs", "")
		var page struct {
			Items []wfRunJSON `json:"items"`
		}
		if st != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("runs of workflow %s: %d %s", workflowID, st, body)
		}
		if len(page.Items) > 1 {
			t.Fatalf("workflow %s has %d runs, want one", workflowID, len(page.Items))
		}
		if len(page.Items) == 1 {
			id = page.Items[0].ID
		}
		return id != ""
	})
	return id
}

// wfRun reads a workflow run.
func wfRun(t *testing.T, m *masterProc, id string) wfRunJSON {
	t.Helper()
	st, body := m.api("GET", "/api/v1/workflow-runs/"+id, "")
	var r wfRunJSON
	if st != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("workflow run %s: %d %s", id, st, body)
	}
	return r
}

func stepStatesOf(r wfRunJSON) string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, s.Name+"="+s.State)
	}
	return strings.Join(out, " ")
}

// settleSteps waits until, for every step, its task's run records and the
// target's hits agree and have not changed for two seconds (a step sent
// twice would show late), and returns the runs by step.
func settleSteps(t *testing.T, m *masterProc, tg *workflowTarget, taskOf map[string]string) map[string][]runJSON {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	stableSince := time.Now()
	names := make([]string, 0, len(taskOf))
	for s := range taskOf {
		names = append(names, s)
	}
	sort.Strings(names)
	for {
		out := map[string][]runJSON{}
		agree := true
		var b strings.Builder
		for _, s := range names {
			out[s] = m.runs(taskOf[s])
			fmt.Fprintf(&b, "%s:%d/%d ", s, len(out[s]), tg.count(s))
			agree = agree && len(out[s]) == tg.count(s)
		}
		if b.String() != last {
			last, stableSince = b.String(), time.Now()
		}
		if agree && time.Since(stableSince) > 2*time.Second {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("step runs and target hits (runs/hits) did not settle: %s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// workflowTarget answers the steps' requests (/hit/<step>), counting them
// per step. A held step's answer waits until the test releases it; the
// others answer after 300-800 ms, so that a step is in flight for a while.
type workflowTarget struct {
	*httptest.Server
	mu    sync.Mutex
	hits  map[string]int
	gates map[string]chan struct{}
	hooks map[string]*sync.Once
	hook  map[string]func()
}

func newWorkflowTarget(t *testing.T) *workflowTarget {
	tg := &workflowTarget{hits: map[string]int{}, gates: map[string]chan struct{}{}, hooks: map[string]*sync.Once{},
		hook: map[string]func(){}}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		step, ok := strings.CutPrefix(r.URL.Path, "/hit/")
		if !ok || step == "" {
			http.NotFound(w, r)
			return
		}
		tg.mu.Lock()
		tg.hits[step]++
		once, fn, gate := tg.hooks[step], tg.hook[step], tg.gates[step]
		tg.mu.Unlock()
		if once != nil {
			// Before answering: the kill lands while the step is in flight.
			once.Do(fn)
		}
		wait := time.Duration(300+100*(int(step[0])%6)) * time.Millisecond
		var after <-chan time.Time
		if gate == nil {
			after = time.After(wait)
		}
		select {
		case <-gate:
		case <-after:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, "ok", step)
	}))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *workflowTarget) count(step string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.hits[step]
}

// hold makes the step's answer wait for release.
func (tg *workflowTarget) hold(step string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.gates[step] = make(chan struct{})
}

func (tg *workflowTarget) release(steps ...string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for _, s := range steps {
		close(tg.gates[s])
	}
}

// onFirstHit runs fn once, at the first request of any of the steps,
// before it is answered.
func (tg *workflowTarget) onFirstHit(fn func(), steps ...string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	once := new(sync.Once)
	for _, s := range steps {
		tg.hooks[s], tg.hook[s] = once, fn
	}
}
