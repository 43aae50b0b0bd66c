package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

type nodeWithHealth struct {
	apiNode
	Health []struct {
		At        time.Time `json:"at"`
		LatencyMS int64     `json:"latency_ms"`
		OK        bool      `json:"ok"`
		Error     string    `json:"error"`
	} `json:"health"`
}

// TestNodePageShowsTasksRunsAndHealth: real health sweeps against an
// in-process worker record its history (one success a minute, every
// failure once it is killed); the node page shows its tasks, recent runs
// (linked to the runs page filtered by node) and the chart with the failures
// marked, the API adds the history to the node, and the probe metrics move.
func TestNodePageShowsTasksRunsAndHealth(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnvWith(t, ns, func(c *master.Config) { c.Metrics = master.NewMetrics() })
		ctx := storetest.Ctx(t)
		down := startStoppableWorker(t, e, "w1")
		task := e.createTask("nightly export", "w1")
		now := time.Now().UTC()
		runs := []store.Run{
			{ID: "run-a", TaskID: task.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: store.ResultFailed, Attempt: 1},
			{ID: "run-b", TaskID: task.ID, Node: "w1", ScheduledAt: now, StartedAt: now.Add(-time.Minute), EndedAt: now, Result: store.ResultSuccess, Attempt: 1},
		}
		if _, err := store.InsertRuns(ctx, e.st.DB, runs); err != nil {
			t.Fatal(err)
		}
		tok := e.bearer("ops")
		anon := e.client()
		health := func() nodeWithHealth {
			t.Helper()
			status, body := e.do(anon, "GET", "/api/v1/nodes/w1", "", tok)
			if status != http.StatusOK {
				t.Fatalf("GET node: %d %s", status, body)
			}
			return decode[nodeWithHealth](t, body)
		}

		// Two sweeps of a healthy worker: one sample (one a minute).
		e.m.Sweep(ctx)
		e.m.Sweep(ctx)
		n := health()
		if n.Name != "w1" || n.Status != int(store.StatusRunning) || len(n.Health) != 1 || !n.Health[0].OK || n.Health[0].Error != "" {
			t.Fatalf("after two healthy sweeps: %+v", n)
		}
		// Killed: every failed check is recorded until the node is offline,
		// then nothing more within the minute.
		down()
		for range 3 {
			e.m.Sweep(ctx)
		}
		if got := e.node("w1"); got.Status != store.StatusOffline {
			t.Fatalf("w1 after three failed checks: status %d, want offline", got.Status)
		}
		for range 3 {
			e.m.Sweep(ctx)
		}
		n = health()
		if len(n.Health) != 4 || !n.Health[0].OK {
			t.Fatalf("history after the kill: %+v; want the success then 3 failures", n.Health)
		}
		for _, h := range n.Health[1:] {
			if h.OK || h.Error == "" || h.At.Before(n.Health[0].At) {
				t.Errorf("failed check recorded as %+v", h)
			}
		}
		if status, body := e.do(anon, "GET", "/api/v1/nodes/w1?health_since="+time.Now().Add(time.Hour).Format(time.RFC3339), "", tok); status != 200 ||
			!strings.Contains(body, `"health":[]`) {
			t.Errorf("health_since in the future: %d %s", status, body)
		}
		if status, body := e.do(anon, "GET", "/api/v1/nodes/w1?health_since=today", "", tok); status != http.StatusBadRequest || !strings.Contains(body, `"health_since"`) {
			t.Errorf("bad health_since: %d %s", status, body)
		}
		if status, _ := e.do(anon, "GET", "/api/v1/nodes/ghost", "", tok); status != http.StatusNotFound {
			t.Errorf("unknown node: %d", status)
		}

		// The console: the list links to the page, which shows it all.
		c := e.login("admin", "admin-password-1")
		if _, list := e.do(c, "GET", "/nodes", "", nil); !strings.Contains(list, `href="/nodes/w1" class="node-link"`) {
			t.Error("the nodes list does not link w1 to its page")
		}
		status, page := e.do(c, "GET", "/nodes/w1", "", nil)
		if status != http.StatusOK {
			t.Fatalf("node page: %d", status)
		}
		for _, want := range []string{
			`<h1 id="node-title">w1</h1>`, `data-testid="status">offline</span>`,
			`href="/tasks/` + task.ID + `">nightly export</a>`,                   // its task
			`id="node-run-run-a"`, `id="node-run-run-b"`, `href="/runs?node=w1"`, // its runs and the link to all of them
			`<svg class="chart" id="health-chart"`, `id="health-samples">4<`, `id="health-failures">3<`,
			`hx-get="/nodes/w1/live"`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("node page lacks %s", want)
			}
		}
		if got := strings.Count(page, `class="health-failed"`); got != 3 {
			t.Errorf("chart marks %d failures, want 3", got)
		}
		if got := strings.Count(page, `class="health-ok"`); got != 1 {
			t.Errorf("chart shows %d successful checks, want 1", got)
		}
		status, frag := e.do(c, "GET", "/nodes/w1/live", "", hx)
		if status != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(frag), `<div id="node-live"`) || strings.Contains(frag, "<html") {
			t.Errorf("live fragment: %d %.200s", status, frag)
		}
		if status, _ := e.do(c, "GET", "/nodes/ghost", "", nil); status != http.StatusNotFound {
			t.Errorf("page of an unknown node: %d, want 404", status)
		}
		// A viewer sees the page, without the Edit button.
		e.addUser("vic", "viewer-password-1", store.RoleViewer)
		v := e.login("vic", "viewer-password-1")
		if status, page := e.do(v, "GET", "/nodes/w1", "", nil); status != 200 || strings.Contains(page, `id="edit-node"`) {
			t.Errorf("viewer's node page: %d, edit shown: %v", status, strings.Contains(page, `id="edit-node"`))
		}

		// The probes moved the metrics: 2 + 3 + the offline node's re-probe.
		m := scrape(t, e, tok)
		if got := m.value(`sm_master_probe_failures_total`); got < 3 {
			t.Errorf("sm_master_probe_failures_total = %v, want >= 3", got)
		}
		if got := m.value(`sm_master_probe_duration_seconds_count`); got < 5 {
			t.Errorf("sm_master_probe_duration_seconds_count = %v, want >= 5", got)
		}
		if got := m.value(`sm_master_nodes{status="offline",type="worker"}`); got != 1 {
			t.Errorf("offline workers = %v, want 1", got)
		}
	})
}
