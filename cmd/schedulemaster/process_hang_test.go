package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// hangFor is how long the test blackholes one master's database: long enough
// for a fire every second to meet the hang many times, within the package's
// time budget.
const hangFor = 20 * time.Second

// Two masters on one MariaDB (or PostgreSQL) database; m2's connections go through a TCP
// proxy that blackholes them (accepted, never answered) for hangFor. Every
// worker lists m2 first, so every claim and run batch meets the hang. With
// claims and run reports hedged to m1 after a short delay, and m2 answering
// 503 within its request deadlines, the hang costs nothing: every second has
// exactly one run, each target hit one run record, and no misfire is
// recorded. m2's /ready answers 503 with a JSON reason within a few seconds,
// and its API answers 503 with a sentence rather than hang.
//
// Before hedging and request deadlines (claims waited the worker's full 5 s
// on the hung master), the same test measured 5 misfire records ("misfire: no
// master reachable to claim ...", 6 fires), 5 seconds with no run and m2's
// API silent for more than 10 s; /ready already answered 503 after 2 s.
func TestProcessHungMasterDatabaseCostsNoFire(t *testing.T) {
	t.Parallel()
	for _, srv := range serverDialects {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			testHungMasterDatabase(t, srv.dialect)
		})
	}
}

func testHungMasterDatabase(t *testing.T, dialect string) {
	dsn := storetest.FreshDSN(t, dialect) // skips without its DSN, fails with SM_TEST_REQUIRE_ALL=1
	proxied, proxy := proxiedDB(t, dsn)

	m1 := startMaster(t, "", "--db", dsn, "--identity", "m1") // migrates first
	m2 := startMaster(t, "", "--db", proxied, "--identity", "m2")
	executors := []string{"w1", "w2", "w3"}
	for _, w := range executors {
		startClusterWorker(t, m2.URL+","+m1.URL, w)
	}
	for _, w := range executors {
		m1.waitNode(w, 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}

	tg := newTarget(t)
	tk := m1.createTask(`{"title":"through a hang","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"http":{"url":"` + tg.URL + `/hang"},"timeout":"5s","misfire":"skip","executors":["w1","w2","w3"]}`)
	m1.taskAction(tk.ID, "start")
	waitHits(t, tg, "/hang", 3, 20*time.Second)

	proxy.Hang()
	hungAt := time.Now()
	hitsAtHang := tg.count("/hang")

	// m2's readiness says so within a few seconds, with a JSON reason.
	probe := &http.Client{Timeout: 10 * time.Second}
	var readyAfter time.Duration
	waitFor(t, 15*time.Second, "m2's /ready answering 503", func() bool {
		resp, err := probe.Get(m2.URL + "/ready")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Ready bool   `json:"ready"`
			Error string `json:"error"`
		}
		if resp.StatusCode != http.StatusServiceUnavailable || json.NewDecoder(resp.Body).Decode(&body) != nil || body.Ready || body.Error == "" {
			return false
		}
		readyAfter = time.Since(hungAt)
		t.Logf("m2 /ready: 503 %q after %s", body.Error, readyAfter.Round(time.Millisecond))
		return true
	})
	if readyAfter > 5*time.Second {
		t.Errorf("m2's /ready answered 503 only after %s, want within a few seconds", readyAfter)
	}
	// Its API answers 503 with a sentence, not a hang, not "log in again".
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", m2.URL+"/api/v1/tasks", nil)
	start := time.Now()
	if resp, err := m2.client.Do(req); err != nil {
		t.Errorf("m2's API during the hang: no answer after %s (%v); want 503 with a sentence within a few seconds", time.Since(start).Round(time.Millisecond), err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		t.Logf("m2 API during the hang: %d %s after %s", resp.StatusCode, strings.TrimSpace(string(b)), took.Round(time.Millisecond))
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "database") || took > 5*time.Second {
			t.Errorf("m2's API during the hang: %d %s after %s; want 503 with a sentence within a few seconds", resp.StatusCode, b, took)
		}
	}

	// Fires go on through the hang: wait until it lasted hangFor.
	waitFor(t, hangFor+10*time.Second, "the hang to last its time", func() bool { return time.Since(hungAt) >= hangFor })
	duringHang := tg.count("/hang") - hitsAtHang
	proxy.Restore()
	restoredAt := time.Now()
	t.Logf("hang of %s: %d target hits meanwhile", restoredAt.Sub(hungAt).Round(time.Millisecond), duringHang)
	if want := int(hangFor/time.Second) - 2; duringHang < want {
		t.Errorf("%d target hits during a hang of %s, want at least %d: fires were lost or late", duringHang, hangFor, want)
	}
	waitHits(t, tg, "/hang", tg.count("/hang")+3, 20*time.Second)
	m1.taskAction(tk.ID, "stop")

	all := settleRecords(t, m1, tg, "/hang", tk.ID)
	var runs, misfires []runJSON
	for _, r := range all {
		if strings.HasPrefix(r.Output, "misfire") {
			misfires = append(misfires, r)
		} else {
			runs = append(runs, r)
		}
	}
	missing, doubled, expected := fireGaps(runs)
	t.Logf("%d target hits, %d run records, %d fires expected; missing %v, doubled %v; %d misfire records",
		tg.count("/hang"), len(runs), expected, missing, doubled, len(misfires))
	for _, r := range misfires {
		t.Logf("misfire record: %s %q", r.ScheduledAt.Format(time.TimeOnly), r.Output)
	}
	if len(missing) > 0 || len(doubled) > 0 || len(runs) != expected || tg.count("/hang") != len(runs) {
		t.Errorf("want target hits == run records == expected fires, none missed or doubled")
	}
	if len(misfires) > 0 {
		t.Errorf("%d misfire records for a hang of one master's database, want none", len(misfires))
	}
	if first, last := runs[0].ScheduledAt, runs[len(runs)-1].ScheduledAt; !first.Before(hungAt) || !last.After(restoredAt) {
		t.Errorf("fires from %s to %s do not span the hang from %s to %s", first, last, hungAt, restoredAt)
	}
}

// settleRecords waits until the task's records (runs and misfire records)
// stop changing and every target hit has its run record, and returns them.
func settleRecords(t *testing.T, m *masterProc, tg *target, path, id string) []runJSON {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	last, stableSince := -1, time.Now()
	for {
		all := m.runs(id)
		runs := 0
		for _, r := range all {
			if !strings.HasPrefix(r.Output, "misfire") {
				runs++
			}
		}
		if len(all) != last {
			last, stableSince = len(all), time.Now()
		}
		if runs >= tg.count(path) && time.Since(stableSince) > 3*time.Second {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("run records (%d) and target hits (%d) did not settle", runs, tg.count(path))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
