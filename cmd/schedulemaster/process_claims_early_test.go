package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// A fire is decided at its time, on real processes: a newer executor of a
// failover task claims the next five fires 8-12 s ahead while the ranked
// one (served longest) is alive, and one fire 2-3 s ahead; the early claims
// are refused or held until the fire's time, and the ranked worker runs
// every one of those fires. A fire the newer node does win and never runs
// becomes a misfire record naming it.
func TestProcessEarlyClaimsNeverTakeAFire(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	tg := newHostileTarget(t)
	startWorker(t, m, "ew2")
	m.waitNode("ew2", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	fake := registerFake(t, m, "efake") // newer: ranked after ew2 at the same priority
	m.waitNode("efake", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	tk := m.createTask(fmt.Sprintf(`{"title":"early claims","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"routing":"failover","http":{"method":"GET","url":%q},"timeout":"1s","executors":["ew2","efake"]}`, tg.URL+"/early"))
	m.taskAction(tk.ID, "start")
	waitFor(t, 20*time.Second, "the ranked worker's first run", func() bool { return tg.count("/early") > 0 })

	claim := func(task string, fire time.Time, run string) (int, protocol.ClaimResponse, string) {
		t.Helper()
		b, _ := json.Marshal(protocol.ClaimRequest{TaskID: task, FireAt: fire, RunID: run})
		status, body := fake.call(t, m, protocol.PathMasterClaim, fake.secret, b)
		var resp protocol.ClaimResponse
		if status == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &resp); err != nil {
				t.Fatalf("claim answer %s: %v", body, err)
			}
		}
		return status, resp, body
	}
	base := time.Now().Truncate(time.Second)
	var fires []time.Time
	for i := range 5 {
		fire := base.Add(time.Duration(8+i) * time.Second)
		fires = append(fires, fire)
		status, resp, body := claim(tk.ID, fire, fmt.Sprintf("early-%d", i))
		if status != http.StatusTooEarly || resp.Won {
			t.Errorf("claim of the fire %s ahead: %d %s, want 425 Too Early", time.Until(fire).Round(time.Millisecond), status, body)
		}
	}
	// Within what the master holds: decided at the fire's time, for ew2.
	held := time.Now().Truncate(time.Second).Add(3 * time.Second)
	fires = append(fires, held)
	status, resp, body := claim(tk.ID, held, "held-1")
	if status != http.StatusOK || resp.Won || resp.Winner != "ew2" {
		t.Errorf("claim 2-3 s ahead: %d %s, want a loss to ew2", status, body)
	}

	last := fires[4]
	waitFor(t, 60*time.Second, "ew2's runs of the claimed fires", func() bool {
		runs := m.runs(tk.ID)
		n := 0
		for _, r := range runs {
			if !r.ScheduledAt.Before(held) && !r.ScheduledAt.After(last) {
				n++
			}
		}
		return n >= len(fires) && time.Now().After(last.Add(2*time.Second))
	})
	byFire := map[time.Time][]runJSON{}
	for _, r := range m.runs(tk.ID) {
		byFire[r.ScheduledAt.UTC()] = append(byFire[r.ScheduledAt.UTC()], r)
	}
	for _, f := range fires {
		rs := byFire[f.UTC()]
		if len(rs) != 1 || rs[0].Node != "ew2" || rs[0].Result != "success" {
			t.Errorf("fire %s: runs %+v, want one success on ew2", f.Format(time.RFC3339), rs)
		}
	}

	// The newer node as the only executor of a task wins a fire and never
	// runs it: a misfire record naming it, under the run id it claimed.
	solo := m.createTask(fmt.Sprintf(`{"title":"claimed, never run","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"http":{"method":"GET","url":%q},"timeout":"1s","executors":["efake"]}`, tg.URL+"/solo"))
	m.taskAction(solo.ID, "start")
	fire := time.Now().Truncate(time.Second)
	if status, resp, body := claim(solo.ID, fire, "never-run-1"); status != http.StatusOK || !resp.Won {
		t.Fatalf("the lone executor's claim: %d %s", status, body)
	}
	var rec hostileRun
	waitFor(t, 60*time.Second, "the misfire record of the claimed fire never run", func() bool {
		status, body := m.api("GET", "/api/v1/runs/never-run-1", "")
		return status == http.StatusOK && json.Unmarshal([]byte(body), &rec) == nil
	})
	if rec.Result != "skipped" || rec.Node != "efake" || !strings.HasPrefix(rec.Output, "misfire: node efake won the claim") {
		t.Errorf("record of the claimed fire never run: %+v", rec)
	}
}
