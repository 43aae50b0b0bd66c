package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// Several masters on one MariaDB database, as real processes: three masters
// (m1, m2, m3, cluster name "master"), workers that list every master in
// different orders, tasks firing every second; then kill -9 of the leader.
//
// Fire accounting. Only a master is killed while tasks run; no executor dies.
// Per the rules a master's death then costs nothing:
//   - a claim in flight at the kill either was committed by the dead master
//     (the executor asks the next master, which finds the fire already held by
//     that executor in the database) or was not (the next master decides it);
//     either way one executor runs the fire, so no fire is missed or doubled;
//   - a run batch in flight was either stored (the resend to the next master
//     is dropped by run id) or not (the resend stores it), so every target hit
//     has exactly one run record.
//
// So the test allows no slack: target hits == run records == every second
// between the first and the last fire. The killed worker is not an executor,
// so its death does not enter the count (that case, a hit without a record,
// is TestProcessTaskContinuesWhenAnExecutorDies's).
func TestProcessMultiMasterFailoverOnMariaDB(t *testing.T) {
	t.Parallel()
	testMultiMasterFailover(t, storetest.FreshDSN(t, "mysql")) // skips without SM_TEST_MYSQL_DSN, fails with SM_TEST_REQUIRE_ALL=1
}

// TestProcessMultiMasterFailoverOnPostgreSQL is the same on one PostgreSQL
// database.
func TestProcessMultiMasterFailoverOnPostgreSQL(t *testing.T) {
	t.Parallel()
	testMultiMasterFailover(t, storetest.FreshDSN(t, "postgres")) // skips without SM_TEST_PG_DSN, fails with SM_TEST_REQUIRE_ALL=1
}

// testMultiMasterFailover is TestProcessMultiMasterFailoverOnMariaDB on the
// database of the --db value dsn.
func testMultiMasterFailover(t *testing.T, dsn string) {
	const interval = time.Second // --health-interval of startMaster
	const maxFailures = 3        // --max-failures of startMaster
	lease := 3 * interval

	// Masters start one after the other: the first one migrates the database.
	masters := map[string]*masterProc{}
	for _, id := range []string{"m1", "m2", "m3"} {
		masters[id] = startMaster(t, "", "--db", dsn, "--identity", id)
	}
	leader := waitOneLeader(t, masters, 20*time.Second)
	var survivors []string
	for _, id := range []string{"m1", "m2", "m3"} {
		if id != leader {
			survivors = append(survivors, id)
		}
	}
	L, a, b := masters[leader], masters[survivors[0]], masters[survivors[1]]
	t.Logf("leader %s; survivors-to-be %s and %s", leader, survivors[0], survivors[1])
	for _, id := range []string{"m1", "m2", "m3"} {
		a.waitNode(id, 10*time.Second, "a running master", func(n *nodeJSON) bool { return n.Type == "master" && n.Status == 2 })
	}

	// Executors talking to different masters first: w1 to the leader, w2 and
	// w3 to the others. wr and wk are bystanders: wr is restarted during the
	// outage, wk is killed after the failover.
	tg := newTarget(t)
	list := func(ms ...*masterProc) string {
		var urls []string
		for _, m := range ms {
			urls = append(urls, m.URL)
		}
		return strings.Join(urls, ",")
	}
	startClusterWorker(t, list(L, a, b), "w1")
	startClusterWorker(t, list(a, b, L), "w2")
	startClusterWorker(t, list(b, L, a), "w3")
	wrDir := t.TempDir()
	wr, wrHost := startClusterWorker(t, list(L, a, b), "wr", "--data-dir", wrDir)
	wk, _ := startClusterWorker(t, list(b, a, L), "wk")
	for _, n := range []string{"w1", "w2", "w3", "wr", "wk"} {
		a.waitNode(n, 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}

	// Tasks are created and started on a master that is not the leader: any
	// master answers the console and pushes to the executors.
	shared := a.createTask(`{"title":"shared","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"http":{"url":"` + tg.URL + `/shared"},"timeout":"5s","executors":["w1","w2","w3"]}`)
	solo := a.createTask(`{"title":"solo on the leader's worker","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"http":{"url":"` + tg.URL + `/solo"},"timeout":"5s","executors":["w1"]}`)
	a.taskAction(shared.ID, "start")
	b.taskAction(solo.ID, "start")
	waitHits(t, tg, "/shared", 4, 20*time.Second)
	waitHits(t, tg, "/solo", 4, 20*time.Second)

	// Kill -9 the leader. A survivor takes the lease once it expired: within
	// one lease after the last renewal plus one health tick. The extra second
	// covers process scheduling under -race on a loaded 2-core CI machine and
	// the poll step.
	L.kill()
	killedAt := time.Now()
	newLeader := waitOneLeader(t, map[string]*masterProc{survivors[0]: a, survivors[1]: b}, 30*time.Second)
	took := time.Since(killedAt)
	t.Logf("new leader %s after %s (bound: lease %s + interval %s)", newLeader, took.Round(time.Millisecond), lease, interval)
	if took > lease+interval+time.Second {
		t.Errorf("new leader after %s, want within lease + interval = %s", took, lease+interval)
	}

	// The dead master shows offline, with its stale heartbeat as the reason.
	a.waitNode(leader, 20*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	if n := b.node(leader); n.Type != "master" || !strings.Contains(n.Reason, "heartbeat") {
		t.Errorf("dead master %+v: want an offline master with a heartbeat reason", n)
	}
	t.Logf("dead master offline after %s", time.Since(killedAt).Round(time.Millisecond))
	for _, id := range survivors {
		if n := a.node(id); n.Status != 2 {
			t.Errorf("surviving master %+v, want running", n)
		}
	}

	// A worker restarted during the outage (same key, same port, the dead
	// master first in its list) registers through another master.
	wr.kill()
	_, port, _ := strings.Cut(wrHost, ":")
	registered := func() int {
		n := 0
		for _, m := range []*masterProc{a, b} {
			n += strings.Count(strings.Join(m.snapshot(), "\n"), `msg="worker registered" node=wr`)
		}
		return n
	}
	before := registered()
	startClusterWorker(t, list(L, a, b), "wr", "--data-dir", wrDir, "--port", port)
	waitFor(t, 30*time.Second, "the restarted worker registering with a surviving master", func() bool { return registered() > before })
	a.waitNode("wr", 20*time.Second, "running again", func(n *nodeJSON) bool { return n.Status == 2 })

	// A killed worker goes offline after max_failures probes of the new
	// leader, not sooner: each failure is counted once, one health interval
	// apart, so the counter's steps are an interval apart (two masters
	// sweeping would count some failures twice, closer together).
	wk.kill()
	killed := time.Now()
	steps := watchFailures(t, b, "wk", 20*time.Second)
	offlineAfter := time.Since(killed)
	var seen []string
	for _, s := range steps {
		seen = append(seen, fmt.Sprintf("%d at +%s", s.failures, s.at.Sub(killed).Round(time.Millisecond)))
	}
	t.Logf("killed worker offline after %s; failure counter %v", offlineAfter.Round(time.Millisecond), seen)
	if low := time.Duration(maxFailures-1)*interval - 300*time.Millisecond; offlineAfter < low {
		t.Errorf("killed worker offline after %s: sooner than %d probes one interval apart (%s)", offlineAfter, maxFailures, low)
	}
	// The n-th failure needs n-1 intervals after the kill: a counter seen
	// higher than that at any time was counted twice. (Measured against the
	// kill, not between observations: the poll sees a step late at times,
	// which only loosens this bound and cannot fail it.)
	for _, s := range steps {
		if most := int((s.at.Sub(killed)+interval/2)/interval) + 1; s.failures > most {
			t.Errorf("failure counter at %d %s after the kill: more than the %d one master's probes can count by then; a failure was counted twice",
				s.failures, s.at.Sub(killed).Round(time.Millisecond), most)
		}
	}
	if n := a.node("wk"); !strings.Contains(n.Reason, "failed health checks") {
		t.Errorf("killed worker %+v: want a health-check reason", n)
	}

	// Connect works from any master: the node is created on one survivor and
	// connected from the other (the handshake names the cluster, not a master).
	_, manHost := startClusterWorker(t, list(a, b), "man", "--autor=false", "--workerof", "master")
	if status, body := a.api("POST", "/api/v1/nodes", `{"name":"man","host":"`+manHost+`"}`); status != http.StatusCreated {
		t.Fatalf("create manual node on %s: %d %s", survivors[0], status, body)
	}
	if status, body := b.api("POST", "/api/v1/nodes/man/connect", ""); status != 200 {
		t.Fatalf("connect from %s: %d %s", survivors[1], status, body)
	}
	if status, body := a.api("POST", "/api/v1/nodes/man/enable", ""); status != 200 {
		t.Fatalf("enable from %s: %d %s", survivors[0], status, body)
	}
	b.waitNode("man", 10*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	// More fires after the failover, then stop and count.
	h := tg.count("/shared")
	waitHits(t, tg, "/shared", h+3, 20*time.Second)
	b.taskAction(shared.ID, "stop")
	a.taskAction(solo.ID, "stop")
	for _, c := range []struct {
		path string
		task taskJSON
	}{{"/shared", shared}, {"/solo", solo}} {
		runs := settle(t, a, tg, c.path, c.task.ID)
		missing, doubled, expected := fireGaps(runs)
		t.Logf("%s: %d hits, %d run records, %d fires expected; missing %v, doubled %v",
			c.path, tg.count(c.path), len(runs), expected, missing, doubled)
		if len(doubled) > 0 || len(missing) > 0 || len(runs) != expected || tg.count(c.path) != len(runs) {
			t.Errorf("%s: want hits == run records == expected fires with none missed or doubled", c.path)
		}
		if first, last := runs[0].ScheduledAt, runs[len(runs)-1].ScheduledAt; !first.Before(killedAt) || !last.After(killedAt.Add(lease+interval)) {
			t.Errorf("%s: fires from %s to %s do not span the failover at %s", c.path, first, last, killedAt)
		}
	}
}

// startClusterWorker runs an auto-registering worker (unless args say
// otherwise) that knows the comma-separated masters.
func startClusterWorker(t *testing.T, masters, name string, args ...string) (*proc, string) {
	t.Helper()
	base := []string{"worker", "--ip", "127.0.0.1", "--port", "0", "--master", masters, "--cluster-key", testClusterKey,
		"--data-dir", t.TempDir(), "--identity", name}
	p, sub := startProc(t, "worker "+name, workerReady, append(base, args...)...)
	return p, sub[1]
}

// masterHealthJSON is a master's GET /health answer.
type masterHealthJSON struct {
	Node   string `json:"node"`
	BootID string `json:"boot_id"`
	Status string `json:"status"`
	Leader bool   `json:"leader"`
}

// masterHealth asks a master's /health; ok is false when it does not answer.
func masterHealth(url string) (h masterHealthJSON, ok bool) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url + "/health")
	if err != nil {
		return h, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&h) != nil {
		return h, false
	}
	return h, true
}

// waitOneLeader polls the masters' /health until exactly one says it leads
// and returns its identity.
func waitOneLeader(t *testing.T, masters map[string]*masterProc, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var leaders []string
		for id, m := range masters {
			if h, ok := masterHealth(m.URL); ok && h.Leader {
				if h.Node != id {
					t.Fatalf("/health of %s names node %q", id, h.Node)
				}
				leaders = append(leaders, id)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single leader among the masters after %s (leaders: %v)", timeout, leaders)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failureStep is a change of a node's failure counter seen by watchFailures.
type failureStep struct {
	failures int
	at       time.Time
}

// watchFailures polls the node until it is offline and returns the failure
// counts it saw on the way, each with when it was first seen.
func watchFailures(t *testing.T, m *masterProc, name string, timeout time.Duration) []failureStep {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var steps []failureStep
	for {
		n := m.node(name)
		if n == nil {
			t.Fatalf("node %s is gone", name)
		}
		if n.Status == 0 {
			return steps
		}
		if n.Failures > 0 && (len(steps) == 0 || steps[len(steps)-1].failures != n.Failures) {
			steps = append(steps, failureStep{n.Failures, time.Now()})
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not offline after %s (last: %+v)", name, timeout, n)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// fireGaps checks the runs of a task firing every second: the seconds between
// its first and last fire that have no run, those with more than one, and how
// many fires that span holds.
func fireGaps(runs []runJSON) (missing, doubled []string, expected int) {
	if len(runs) == 0 {
		return nil, nil, 0
	}
	per := map[int64]int{}
	var secs []int64
	for _, r := range runs {
		s := r.ScheduledAt.Unix()
		if per[s] == 0 {
			secs = append(secs, s)
		}
		per[s]++
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	sort.Slice(runs, func(i, j int) bool { return runs[i].ScheduledAt.Before(runs[j].ScheduledAt) })
	first, last := secs[0], secs[len(secs)-1]
	for s := first; s <= last; s++ {
		label := time.Unix(s, 0).UTC().Format("15:04:05")
		switch {
		case per[s] == 0:
			missing = append(missing, label)
		case per[s] > 1:
			doubled = append(doubled, fmt.Sprintf("%s×%d", label, per[s]))
		}
	}
	return missing, doubled, int(last - first + 1)
}
