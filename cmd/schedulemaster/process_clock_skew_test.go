package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A worker whose clock is 3 s fast (SM_WORKER_CLOCK_OFFSET) beside a ranked
// worker of a failover task fires 3 s early by the master's clock: its
// claims are judged at the fire's time, so it never runs a fire the ranked
// one runs; and /api/v1/nodes shows it skewed, with the reason, the ranked
// one not.
func TestProcessFastClockWorkerIsShownAndTakesNoFire(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	tg := newHostileTarget(t)
	startWorker(t, m, "sk1")
	m.waitNode("sk1", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	startWorkerEnv(t, m, "skfast", []string{"SM_WORKER_CLOCK_OFFSET=3s"})
	m.waitNode("skfast", 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })

	type skewJSON struct {
		Name            string `json:"name"`
		ClockSkewMS     *int64 `json:"clock_skew_ms"`
		ClockSkewed     bool   `json:"clock_skewed"`
		ClockSkewReason string `json:"clock_skew_reason"`
	}
	skews := func() map[string]skewJSON {
		status, body := m.api("GET", "/api/v1/nodes", "")
		if status != 200 {
			t.Fatalf("list nodes: %d %s", status, body)
		}
		var nodes []skewJSON
		if err := json.Unmarshal([]byte(body), &nodes); err != nil {
			t.Fatal(err)
		}
		out := map[string]skewJSON{}
		for _, n := range nodes {
			out[n.Name] = n
		}
		return out
	}
	// Registration and then the probes measure both.
	waitFor(t, 20*time.Second, "skfast flagged with a clock skew and sk1 measured in step", func() bool {
		s := skews()
		f, ok := s["skfast"], s["sk1"]
		return f.ClockSkewed && ok.ClockSkewMS != nil && !ok.ClockSkewed
	})
	s := skews()
	if f := s["skfast"]; *f.ClockSkewMS < 2500 || *f.ClockSkewMS > 3500 ||
		!strings.HasSuffix(f.ClockSkewReason, " s ahead of the master's") {
		t.Errorf("skfast: %d ms, reason %q; want about 3000 ms ahead", *f.ClockSkewMS, f.ClockSkewReason)
	}

	tk := m.createTask(fmt.Sprintf(`{"title":"fast clock","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"routing":"failover","http":{"method":"GET","url":%q},"timeout":"1s","executors":["sk1","skfast"]}`, tg.URL+"/skew"))
	m.taskAction(tk.ID, "start")
	waitFor(t, 20*time.Second, "the ranked worker's first run", func() bool { return tg.count("/skew") > 0 })
	from := time.Now().Truncate(time.Second).Add(time.Second)
	to := from.Add(8 * time.Second)
	waitFor(t, 60*time.Second, "the fires of 8 s recorded", func() bool {
		if time.Now().Before(to.Add(3 * time.Second)) {
			return false
		}
		n := 0
		for _, r := range m.runs(tk.ID) {
			if !r.ScheduledAt.Before(from) && r.ScheduledAt.Before(to) {
				n++
			}
		}
		return n >= 6
	})
	byFire := map[time.Time][]runJSON{}
	for _, r := range m.runs(tk.ID) {
		if r.Node == "skfast" {
			t.Errorf("the fast worker ran fire %s: %+v", r.ScheduledAt.Format(time.RFC3339), r)
		}
		byFire[r.ScheduledAt.UTC()] = append(byFire[r.ScheduledAt.UTC()], r)
	}
	for f, rs := range byFire {
		if len(rs) != 1 {
			t.Errorf("fire %s ran %d times: %+v", f.Format(time.RFC3339), len(rs), rs)
		}
	}
}
