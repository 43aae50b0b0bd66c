package main

import (
	"testing"
	"time"
)

// An executor that dies does not stop the task on the others: until the health
// checker notices, the claim of each fire waits briefly for it and goes to a
// live executor; afterwards the live ones share the fires. Every fire still
// runs once.
func TestProcessTaskContinuesWhenAnExecutorDies(t *testing.T) {
	t.Parallel()
	m := startMaster(t, "")
	tg := newTarget(t)
	victimDir := t.TempDir()
	victim, _ := startWorker(t, m, "fa", "--data-dir", victimDir)
	startWorker(t, m, "fb")
	for _, n := range []string{"fa", "fb"} {
		m.waitNode(n, 20*time.Second, "running", func(n *nodeJSON) bool { return n.Status == 2 })
	}
	tk := m.createTask(`{"title":"failover","type":"http","schedule":{"kind":"cron","cron":"* * * * * *"},
		"http":{"url":"` + tg.URL + `/f"},"executors":["fa","fb"]}`)
	m.taskAction(tk.ID, "start")
	waitHits(t, tg, "/f", 3, 15*time.Second)

	victim.kill()
	killedAt := tg.count("/f")
	m.waitNode("fa", 20*time.Second, "offline", func(n *nodeJSON) bool { return n.Status == 0 })
	waitHits(t, tg, "/f", killedAt+5, 15*time.Second)

	m.taskAction(tk.ID, "stop")
	// The killed worker comes back with its data dir: a run it finished just
	// before the kill is still in its journal and gets delivered now.
	startWorker(t, m, "fa", "--data-dir", victimDir)
	m.waitNode("fa", 20*time.Second, "running again", func(n *nodeJSON) bool { return n.Status == 2 })
	runs := settleWithin(t, m, tg, "/f", tk.ID, 1)
	seen := map[time.Time]bool{}
	after := 0
	for _, r := range runs {
		if seen[r.ScheduledAt] {
			t.Fatalf("fire %s ran twice", r.ScheduledAt)
		}
		seen[r.ScheduledAt] = true
		if r.Node == "fb" {
			after++
		}
	}
	if after < 5 {
		t.Fatalf("the surviving executor ran %d fires, want at least 5", after)
	}
	if got := m.node("fb"); got.Status != 2 {
		t.Fatalf("surviving executor %+v", got)
	}
}

// settleWithin is settle, allowing the target up to slack more hits than run
// records: a worker killed in the middle of a request leaves a hit but no run.
func settleWithin(t *testing.T, m *masterProc, tg *target, path, id string, slack int) []runJSON {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, stableSince := -1, time.Now()
	for {
		runs := m.runs(id)
		hits := tg.count(path)
		if len(runs) != last {
			last, stableSince = len(runs), time.Now()
		}
		if hits >= len(runs) && hits-len(runs) <= slack && time.Since(stableSince) > 3*time.Second {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs (%d) and target hits (%d) did not settle", len(runs), hits)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
