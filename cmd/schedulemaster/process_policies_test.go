package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// Process tests of the scheduling policies (issue 11): overlap, routing,
// broadcast shards and misfires, on a real master and real worker processes
// calling a loopback target. The machine is shared and slow at times: the
// assertions are about what must never happen (two runs at once, a fire
// lost without a record) or what must happen at least once, with generous
// deadlines, never about how long something took.

// arrival is one request the policy target received.
type arrival struct {
	path, query, body string
	start, end        time.Time // end is zero while the request is in flight
}

// policyTarget is a loopback HTTP target that records every arrival and how
// many requests of each path were in flight at once. ?sleep=2500ms makes it
// answer slowly.
type policyTarget struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []*arrival
	inflight map[string]int
	peak     map[string]int
}

func newPolicyTarget(t *testing.T) *policyTarget {
	pt := &policyTarget{inflight: map[string]int{}, peak: map[string]int{}}
	pt.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a := &arrival{path: r.URL.Path, query: r.URL.RawQuery, body: string(body), start: time.Now()}
		pt.mu.Lock()
		pt.arrivals = append(pt.arrivals, a)
		pt.inflight[a.path]++
		pt.peak[a.path] = max(pt.peak[a.path], pt.inflight[a.path])
		pt.mu.Unlock()
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
		}
		pt.mu.Lock()
		pt.inflight[a.path]--
		a.end = time.Now()
		pt.mu.Unlock()
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(pt.Close)
	return pt
}

// of returns copies of the arrivals on path, in order of arrival.
func (pt *policyTarget) of(path string) []arrival {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var out []arrival
	for _, a := range pt.arrivals {
		if a.path == path {
			out = append(out, *a)
		}
	}
	return out
}

// done counts the finished arrivals on path.
func (pt *policyTarget) done(path string) int {
	n := 0
	for _, a := range pt.of(path) {
		if !a.end.IsZero() {
			n++
		}
	}
	return n
}

func (pt *policyTarget) peakOf(path string) int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.peak[path]
}

// policyRun is a run as the API shows it, with the manual flag.
type policyRun struct {
	runJSON
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Manual    bool      `json:"manual"`
}

func (m *masterProc) policyRuns(id string) []policyRun {
	m.t.Helper()
	status, resp := m.api("GET", "/api/v1/tasks/"+id+"/runs?limit=500", "")
	if status != 200 {
		m.t.Fatalf("runs: %d %s", status, resp)
	}
	var page struct {
		Items []policyRun `json:"items"`
	}
	if err := json.Unmarshal([]byte(resp), &page); err != nil {
		m.t.Fatal(err)
	}
	slices.SortFunc(page.Items, func(a, b policyRun) int { return a.ScheduledAt.Compare(b.ScheduledAt) })
	return page.Items
}

// quietRuns waits until the task's run records stop changing for 3 s and
// returns them.
func (m *masterProc) quietRuns(id string) []policyRun {
	m.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last, since := -1, time.Now()
	for {
		runs := m.policyRuns(id)
		if len(runs) != last {
			last, since = len(runs), time.Now()
		}
		if time.Since(since) > 3*time.Second {
			return runs
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("task %s: runs still changing after 60s", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func running(n *nodeJSON) bool { return n.Status == 2 }

// One worker, three tasks firing every second at a target that takes 2.5 s:
// skip never runs two at once and records the skipped fires saying why;
// queue never runs two at once, runs a waiting fire right after the previous
// run, with at most one waiting; allow overlaps.
func TestProcessOverlapPolicies(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	tg := newPolicyTarget(t)
	_, host := startWorker(t, m, "ov1")
	m.waitNode("ov1", 20*time.Second, "running", running)
	waitScheduling(t, host, 10*time.Second)
	ids := map[string]string{}
	for _, policy := range []string{"skip", "queue", "allow"} {
		tk := m.createTask(`{"title":"overlap ` + policy + `","type":"http","schedule":{"kind":"interval","every":"1s"},
			"http":{"url":"` + tg.URL + `/` + policy + `?sleep=2500ms"},"timeout":"20s","overlap":"` + policy + `","executors":["ov1"]}`)
		ids[policy] = tk.ID
	}
	for _, id := range ids {
		m.taskAction(id, "start")
	}
	waitFor(t, 90*time.Second, "five finished runs under skip and queue, two allow runs at once", func() bool {
		return tg.done("/skip") >= 5 && tg.done("/queue") >= 5 && tg.peakOf("/allow") >= 2
	})
	for _, id := range ids {
		m.taskAction(id, "stop")
	}

	// skip: never two at once; skipped fires recorded with the reason.
	if p := tg.peakOf("/skip"); p != 1 {
		t.Errorf("skip: %d runs at once, want never more than 1", p)
	}
	skipRuns := m.quietRuns(ids["skip"])
	skipped, ran := 0, 0
	for _, r := range skipRuns {
		switch r.Result {
		case "skipped":
			skipped++
			if !strings.Contains(r.Output, "skipped: the previous run (id ") || !strings.Contains(r.Output, "was still running") {
				t.Errorf("skip: skipped run says %q", r.Output)
			}
		case "success":
			ran++
		}
	}
	t.Logf("skip: %d runs, %d skipped fires recorded", ran, skipped)
	if skipped < ran || ran < 5 {
		t.Errorf("skip: %d runs and %d skipped records: a 2.5 s run every second must skip at least one fire per run", ran, skipped)
	}

	// queue: never two at once; queued fires start late but right after the
	// previous run; one waits at most, further fires are skipped.
	if p := tg.peakOf("/queue"); p != 1 {
		t.Errorf("queue: %d runs at once, want never more than 1", p)
	}
	queueRuns := m.quietRuns(ids["queue"])
	waited, capped := 0, 0
	for _, r := range queueRuns {
		switch {
		case r.Result == "skipped" && strings.Contains(r.Output, "was already queued behind it"):
			capped++
		case r.Result == "skipped" && strings.Contains(r.Output, "stopped"): // queued when the task was stopped
		case r.Result == "skipped":
			t.Errorf("queue: skipped run says %q", r.Output)
		case r.StartedAt.Sub(r.ScheduledAt) > time.Second:
			waited++
			// One run (2.5 s) ahead of it at most, with room for a slow machine;
			// an unbounded queue grows 1.5 s per run.
			if w := r.StartedAt.Sub(r.ScheduledAt); w > 6*time.Second {
				t.Errorf("queue: a fire waited %s: more than one was waiting", w)
			}
		}
	}
	t.Logf("queue: %d runs, %d of them queued, %d fires refused with one already waiting", len(queueRuns)-capped, waited, capped)
	if waited < 2 || capped < 2 {
		t.Errorf("queue: %d queued runs and %d refused fires, want both at least 2", waited, capped)
	}
	arr := tg.of("/queue")
	backToBack := 0
	for i := 1; i < len(arr); i++ {
		if !arr[i-1].end.IsZero() && arr[i].start.Before(arr[i-1].end) {
			t.Errorf("queue: run %d started before run %d ended", i, i-1)
		}
		if !arr[i-1].end.IsZero() && arr[i].start.Sub(arr[i-1].end) < 900*time.Millisecond {
			backToBack++
		}
	}
	if backToBack < 2 {
		t.Errorf("queue: %d of %d runs started right after the previous one ended", backToBack, len(arr)-1)
	}

	// allow: overlaps, nothing skipped.
	for _, r := range m.quietRuns(ids["allow"]) {
		if r.Result == "skipped" {
			t.Errorf("allow: skipped run %q", r.Output)
		}
	}
	t.Logf("allow: up to %d runs at once", tg.peakOf("/allow"))
}

// nodesOf counts the run records of each node among runs that ran (not skipped).
func nodesOf(runs []policyRun) map[string]int {
	out := map[string]int{}
	for _, r := range runs {
		if r.Result != "skipped" {
			out[r.Node]++
		}
	}
	return out
}

// Three executors with priorities 1, 9 and 5: failover runs every fire on
// the priority 9 one and moves to the priority 5 one when it is killed;
// round_robin alternates between two; hash keeps one key on the node the
// rendezvous hash names.
func TestProcessRoutingStrategies(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	tg := newPolicyTarget(t)
	workers := map[string]*proc{}
	for _, w := range []struct{ name, prio string }{{"r1", "1"}, {"r2", "9"}, {"r3", "5"}} {
		p, host := startWorker(t, m, w.name, "--priority", w.prio)
		workers[w.name] = p
		m.waitNode(w.name, 20*time.Second, "running", running)
		m.setPriority(w.name, w.prio)
		waitScheduling(t, host, 10*time.Second)
	}
	every := `"schedule":{"kind":"cron","cron":"* * * * * *"},"timeout":"10s"`
	failover := m.createTask(`{"title":"failover","type":"http",` + every + `,"http":{"url":"` + tg.URL + `/failover"},
		"routing":"failover","executors":["r1","r2","r3"]}`)
	rr := m.createTask(`{"title":"round robin","type":"http",` + every + `,"http":{"url":"` + tg.URL + `/rr"},
		"routing":"round_robin","executors":["r1","r3"]}`)
	hashBody := func(key string) string {
		return `{"title":"hash","type":"http",` + every + `,"http":{"url":"` + tg.URL + `/hash?c={{customer}}"},
		"params":{"customer":"` + key + `"},"routing":"hash","routing_key":"customer","executors":["r1","r2","r3"]}`
	}
	hash := m.createTask(hashBody("acme-0"))
	// A key whose node is r3: neither the first by name nor the top priority,
	// so that landing there is the hash's doing.
	all := []master.Candidate{{Name: "r1"}, {Name: "r2"}, {Name: "r3"}}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("acme-%d", i); master.RankHash(hash.ID, k, all)[0].Name == "r3" {
			key = k
		}
	}
	if status, resp := m.api("PUT", "/api/v1/tasks/"+hash.ID, hashBody(key)); status != 200 {
		t.Fatalf("edit the hash task: %d %s", status, resp)
	}
	for _, id := range []string{failover.ID, rr.ID, hash.ID} {
		m.taskAction(id, "start")
	}
	waitFor(t, 60*time.Second, "ten runs of each task", func() bool {
		return len(m.policyRuns(failover.ID)) >= 10 && len(m.policyRuns(rr.ID)) >= 10 && len(m.policyRuns(hash.ID)) >= 10
	})

	// failover: the highest priority runs the fires (a claim delayed past
	// its grace on a busy machine may let another win now and then).
	before := nodesOf(m.policyRuns(failover.ID))
	t.Logf("failover before the kill: %v", before)
	if total := before["r1"] + before["r2"] + before["r3"]; before["r2"]*10 < total*8 {
		t.Errorf("failover: r2 (priority 9) ran %d of %d fires, want at least 80%%", before["r2"], total)
	}

	// round_robin: consecutive fires alternate between r1 and r3.
	rrRuns := m.policyRuns(rr.ID)
	alternate := 0
	for i := 1; i < len(rrRuns); i++ {
		if rrRuns[i].Node != rrRuns[i-1].Node {
			alternate++
		}
	}
	t.Logf("round_robin: %d of %d consecutive fires changed node (%v)", alternate, len(rrRuns)-1, nodesOf(rrRuns))
	if alternate*10 < (len(rrRuns)-1)*8 {
		t.Errorf("round_robin: only %d of %d consecutive fires alternated", alternate, len(rrRuns)-1)
	}

	// hash: the key's node, by the same rendezvous hash the master ranks with.
	want := "r3"
	hashNodes := nodesOf(m.policyRuns(hash.ID))
	t.Logf("hash: key %s ran on %v, its node is %s", key, hashNodes, want)
	if total := hashNodes["r1"] + hashNodes["r2"] + hashNodes["r3"]; hashNodes[want]*10 < total*8 {
		t.Errorf("hash: %s ran %d of %d fires of one key, want at least 80%%", want, hashNodes[want], total)
	}
	for _, a := range tg.of("/hash") {
		if a.query != "c="+key {
			t.Fatalf("hash: target got %q, want the param expanded", a.query)
		}
	}

	// Kill the failover's node: the next priority takes over.
	workers["r2"].kill()
	m.waitNode("r2", 30*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	offlineAt := time.Now()
	waitFor(t, 60*time.Second, "five failover runs after r2 went offline", func() bool {
		n := 0
		for _, r := range m.policyRuns(failover.ID) {
			if r.ScheduledAt.After(offlineAt) {
				n++
			}
		}
		return n >= 5
	})
	var after []policyRun
	for _, r := range m.policyRuns(failover.ID) {
		if r.ScheduledAt.After(offlineAt) {
			after = append(after, r)
		}
	}
	got := nodesOf(after)
	t.Logf("failover after the kill: %v", got)
	if got["r2"] > 0 || got["r3"]*10 < len(after)*8 {
		t.Errorf("failover with r2 dead: %v, want r3 (priority 5) on at least 80%% and r2 on none", got)
	}
	for _, id := range []string{failover.ID, rr.ID, hash.ID} {
		m.taskAction(id, "stop")
	}
}

var shardRE = regexp.MustCompile(`^i=(\d+)&n=(\d+)$`)

// shardsSince returns the shards ("i/n", from the URL and the body alike)
// the target got on /bc from arrival index from on.
func shardsSince(t *testing.T, tg *policyTarget, from int) []string {
	t.Helper()
	var out []string
	arr := tg.of("/bc")
	for _, a := range arr[min(from, len(arr)):] {
		m := shardRE.FindStringSubmatch(a.query)
		if m == nil || a.body != "shard="+m[1]+"/"+m[2] {
			t.Fatalf("broadcast arrival query %q body %q: placeholders not expanded alike", a.query, a.body)
		}
		out = append(out, m[1]+"/"+m[2])
	}
	return out
}

// Broadcast runs every fire on every running executor, one run record each,
// each told its shard by {{SHARD_INDEX}}/{{SHARD_TOTAL}} in the URL and the
// body; stopping one executor shrinks the total to the executors that run.
func TestProcessBroadcastShards(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	tg := newPolicyTarget(t)
	workers := map[string]*proc{}
	for _, name := range []string{"b1", "b2", "b3"} {
		p, host := startWorker(t, m, name)
		workers[name] = p
		m.waitNode(name, 20*time.Second, "running", running)
		waitScheduling(t, host, 10*time.Second)
	}
	tk := m.createTask(`{"title":"broadcast","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},"timeout":"10s",
		"http":{"method":"POST","url":"` + tg.URL + `/bc?i={{SHARD_INDEX}}&n={{SHARD_TOTAL}}","body":"shard={{SHARD_INDEX}}/{{SHARD_TOTAL}}"},
		"routing":"broadcast","executors":["b1","b2","b3"]}`)
	m.taskAction(tk.ID, "start")
	waitFor(t, 60*time.Second, "every fire on three executors", func() bool {
		perFire := map[time.Time]int{}
		for _, r := range m.policyRuns(tk.ID) {
			perFire[r.ScheduledAt]++
		}
		full := 0
		for _, n := range perFire {
			if n == 3 {
				full++
			}
		}
		return full >= 3
	})
	for _, r := range m.policyRuns(tk.ID) {
		if r.Result != "success" {
			t.Fatalf("broadcast run %+v", r)
		}
	}
	perFire := map[time.Time][]string{}
	for _, r := range m.policyRuns(tk.ID) {
		if slices.Contains(perFire[r.ScheduledAt], r.Node) {
			t.Fatalf("fire %s recorded twice on %s", r.ScheduledAt, r.Node)
		}
		perFire[r.ScheduledAt] = append(perFire[r.ScheduledAt], r.Node)
	}
	thirds := shardsSince(t, tg, 0)
	for _, want := range []string{"0/3", "1/3", "2/3"} {
		if !slices.Contains(thirds, want) {
			t.Fatalf("shards %v: %s never seen", thirds, want)
		}
	}

	// b2 stops gracefully: the master marks it offline and re-pushes the
	// shards of the two left.
	if err := workers["b2"].term(); err != nil {
		t.Fatal(err)
	}
	m.waitNode("b2", 20*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	from := len(tg.of("/bc"))
	waitFor(t, 30*time.Second, "shards 0/2 and 1/2", func() bool {
		s := shardsSince(t, tg, from)
		return slices.Contains(s, "0/2") && slices.Contains(s, "1/2")
	})
	// From the next fires on there is no third any more.
	from = len(tg.of("/bc"))
	waitFor(t, 30*time.Second, "three more fires", func() bool { return len(tg.of("/bc")) >= from+6 })
	halves := shardsSince(t, tg, from)
	for _, s := range halves {
		if s != "0/2" && s != "1/2" {
			t.Fatalf("shards after b2 stopped: %v, want only 0/2 and 1/2", halves)
		}
	}
	count := map[string]int{}
	for _, s := range halves {
		count[s]++
	}
	if d := count["0/2"] - count["1/2"]; d < -1 || d > 1 {
		t.Fatalf("shards after b2 stopped: %v: each fire must reach both running executors", count)
	}
	m.taskAction(tk.ID, "stop")
}

var misfireRE = regexp.MustCompile(`^misfire: (\d+) fires from \S+ to \S+ did not run: no running executor`)

// misfireTask starts a master, one worker and a task firing every second on
// it with the given misfire policy; it stops the worker gracefully, lets a
// few fires pass and starts the worker again (same identity and key).
func misfireTask(t *testing.T, policy string) (m *masterProc, tg *policyTarget, id string, missed time.Duration) {
	t.Helper()
	m = startMaster(t, "")
	tg = newPolicyTarget(t)
	dir := t.TempDir()
	w, host := startWorker(t, m, "mf1", "--data-dir", dir)
	m.waitNode("mf1", 20*time.Second, "running", running)
	waitScheduling(t, host, 10*time.Second)
	tk := m.createTask(`{"title":"misfire ` + policy + `","type":"http","schedule":{"kind":"interval","every":"1s"},"timeout":"10s",
		"http":{"url":"` + tg.URL + `/mf"},"misfire":"` + policy + `","executors":["mf1"]}`)
	m.taskAction(tk.ID, "start")
	waitFor(t, 30*time.Second, "two runs", func() bool { return tg.done("/mf") >= 2 })

	if err := w.term(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	m.waitNode("mf1", 20*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	waitFor(t, 30*time.Second, "the task flagged not runnable", func() bool {
		_, body := m.api("GET", "/api/v1/tasks/"+tk.ID, "")
		return strings.Contains(body, `"runnable":false`)
	})
	hits := tg.done("/mf")
	waitFor(t, 30*time.Second, "five seconds of fires", func() bool { return time.Since(stopped) > 5*time.Second })
	if tg.done("/mf") != hits {
		t.Fatal("fires ran with the only executor stopped")
	}
	_, host = startWorker(t, m, "mf1", "--data-dir", dir)
	m.waitNode("mf1", 20*time.Second, "running again", running)
	waitScheduling(t, host, 10*time.Second)
	return m, tg, tk.ID, time.Since(stopped)
}

// Misfire skip: the fires due while the only executor was stopped are one
// skipped run by the master, with their count, recorded once.
func TestProcessMisfireSkipWhileTheOnlyExecutorIsDown(t *testing.T) {
	t.Parallel()
	m, tg, id, missed := misfireTask(t, "skip")
	var rec []policyRun
	waitFor(t, 30*time.Second, "a misfire record", func() bool {
		rec = rec[:0]
		for _, r := range m.policyRuns(id) {
			if misfireRE.MatchString(r.Output) {
				rec = append(rec, r)
			}
		}
		return len(rec) > 0
	})
	waitFor(t, 30*time.Second, "runs again", func() bool { return tg.done("/mf") >= 4 })
	// Several sweeps of the leader go by: the window is recorded once.
	hold(t, 4*time.Second, "one misfire record", func() bool {
		n := 0
		for _, r := range m.policyRuns(id) {
			if strings.HasPrefix(r.Output, "misfire") {
				n++
			}
		}
		return n == 1
	})
	r := rec[0]
	n, _ := strconv.Atoi(misfireRE.FindStringSubmatch(r.Output)[1])
	t.Logf("misfire record: %q (worker down about %s)", r.Output, missed.Round(time.Second))
	if r.Result != "skipped" || r.Node != "master" || n < 4 || n > int(missed/time.Second)+2 {
		t.Fatalf("misfire record %+v: want skipped by the master, counting 4 to %d fires", r, int(missed/time.Second)+2)
	}
}

// hold polls cond for d and fails as soon as it does not hold: what must
// never happen (a window counted twice) is watched for a while.
func hold(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		if !cond() {
			t.Fatalf("%s no longer holds", what)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Misfire run_once: one catch-up run when the executor is back, no skipped record.
func TestProcessMisfireRunOnceWhileTheOnlyExecutorIsDown(t *testing.T) {
	t.Parallel()
	m, _, id, _ := misfireTask(t, "run_once")
	waitFor(t, 30*time.Second, "a catch-up run", func() bool {
		for _, r := range m.policyRuns(id) {
			if r.Manual {
				return true
			}
		}
		return false
	})
	manualRuns := func() int {
		n := 0
		for _, r := range m.policyRuns(id) {
			if r.Manual {
				n++
			}
		}
		return n
	}
	hold(t, 4*time.Second, "one catch-up run", func() bool { return manualRuns() == 1 })
	manual := 0
	for _, r := range m.policyRuns(id) {
		if r.Manual {
			manual++
			if r.Node != "mf1" || r.Result != "success" {
				t.Errorf("catch-up run %+v", r)
			}
		}
		if strings.HasPrefix(r.Output, "misfire") {
			t.Errorf("misfire record %q under run_once", r.Output)
		}
	}
	if manual != 1 {
		t.Fatalf("%d catch-up runs, want exactly one", manual)
	}
	_, body := m.api("GET", "/api/v1/events?action=task.misfire", "")
	if !strings.Contains(body, "one catch-up run sent to mf1") {
		t.Errorf("no misfire event naming the catch-up: %s", body)
	}
}

// Master unreachable: a task with two executors claims each fire through the
// master; with the master killed the fires cannot be claimed, and when it is
// back the workers record the missed fires (worker-side misfire, skip).
func TestProcessMisfireWhileTheMasterIsDown(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	m := startMaster(t, dataDir)
	tg := newPolicyTarget(t)
	for _, name := range []string{"mu1", "mu2"} {
		_, host := startWorker(t, m, name)
		m.waitNode(name, 20*time.Second, "running", running)
		waitScheduling(t, host, 10*time.Second)
	}
	tk := m.createTask(`{"title":"claimed","type":"http","schedule":{"kind":"interval","every":"1s"},"timeout":"10s",
		"http":{"url":"` + tg.URL + `/mu"},"executors":["mu1","mu2"]}`)
	m.taskAction(tk.ID, "start")
	waitFor(t, 30*time.Second, "three runs", func() bool { return tg.done("/mu") >= 3 })

	addr := strings.TrimPrefix(m.URL, "http://")
	m.kill()
	killed := time.Now()
	hits := tg.done("/mu")
	waitFor(t, 30*time.Second, "five seconds without a master", func() bool { return time.Since(killed) > 5*time.Second })
	if tg.done("/mu") > hits+1 { // one fire may have been claimed just before the kill
		t.Fatalf("fires ran without a master to claim them: %d hits after the kill", tg.done("/mu")-hits)
	}
	m2 := startMaster(t, dataDir, "--listen", addr)
	var rec []policyRun
	waitFor(t, 60*time.Second, "a worker's misfire record", func() bool {
		rec = rec[:0]
		for _, r := range m2.policyRuns(tk.ID) {
			if strings.HasPrefix(r.Output, "misfire: no master reachable") {
				rec = append(rec, r)
			}
		}
		return len(rec) > 0
	})
	for _, r := range rec {
		t.Logf("misfire record on %s: %q", r.Node, r.Output)
		if r.Result != "skipped" || (r.Node != "mu1" && r.Node != "mu2") {
			t.Errorf("misfire record %+v: want skipped by a worker", r)
		}
	}
	m2.taskAction(tk.ID, "stop")
}
