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
	m := startMaster(t, "")
	tg := newTarget(t)
	victim, _ := startWorker(t, m, "fa")
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
	runs := settle(t, m, tg, "/f", tk.ID)
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
