package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// addRuns stores runs of a task with these results and durations, the first
// the newest, a second apart.
func (e *env) addRuns(task string, results []string, ms []int64) {
	e.t.Helper()
	base := time.Now().UTC().Add(-time.Minute)
	rows := make([]store.Run, len(results))
	for i := range results {
		at := base.Add(-time.Duration(i) * time.Second)
		rows[i] = store.Run{ID: fmt.Sprintf("%s-r%03d", task, i), TaskID: task, Node: "w1", ScheduledAt: at, StartedAt: at,
			EndedAt: at, DurationMS: ms[i], Result: results[i], Attempt: 1}
	}
	if _, err := store.InsertRuns(context.Background(), e.st.DB, rows); err != nil {
		e.t.Fatal(err)
	}
}

// TestTaskHealthShown: the task's health is in the API (task and list),
// on its page (rate, p50, p95, the chart with failed runs marked) and as a
// failing marker in the list when its last three runs failed, not before.
func TestTaskHealthShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addOfflineNode("w1")
	admin := e.login("admin", "admin-password-1")
	bad, good := e.createTask("nightly export", "w1"), e.createTask("steady ping", "w1")
	// bad: newest three failed (one timed out), then 7 successes: 30% ok.
	e.addRuns(bad.ID, []string{"failed", "timeout", "failed", "success", "success", "success", "success", "success", "success", "success"},
		[]int64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000})
	e.addRuns(good.ID, []string{"success", "failed", "failed", "failed"}, []int64{10, 20, 30, 40})

	st, body := e.do(admin, "GET", "/api/v1/tasks/"+bad.ID, "", nil)
	if st != http.StatusOK || !strings.Contains(body, `"health":{"runs":10,"success_rate":0.7,"p50_ms":500,"p95_ms":1000,"last_failed_streak":3,"window":50,"skipped":0}`) {
		t.Fatalf("API task: %d %s", st, body)
	}
	// Health is read-only: a GET sent back as a PUT is accepted.
	if st, body := e.do(admin, "PUT", "/api/v1/tasks/"+bad.ID, body, nil); st != http.StatusOK {
		t.Fatalf("PUT of the GET answer: %d %s", st, body)
	}
	st, body = e.do(admin, "GET", "/api/v1/tasks", "", nil)
	if st != http.StatusOK || strings.Count(body, `"health":{`) != 2 || !strings.Contains(body, `"last_failed_streak":0`) {
		t.Fatalf("API list: %d %s", st, body)
	}

	_, page := e.do(admin, "GET", "/tasks/"+bad.ID, "", nil)
	for _, want := range []string{`id="health-rate">70%<`, `id="health-p50">500ms<`, `id="health-p95">1.0s<`, `7 of 10 runs succeeded`,
		`id="health-failing"`, `last 3 runs failed`, `id="duration-chart"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("task page lacks %q", want)
		}
	}
	if n := strings.Count(page, `class="duration-fail-mark"`); n != 3 {
		t.Fatalf("the chart marks %d failed runs, want 3", n)
	}
	if n := strings.Count(page, `class="duration-run"`); n != 10 {
		t.Fatalf("the chart has %d runs, want 10", n)
	}
	// The live fragment carries the health too: it refreshes with the runs.
	_, live := e.do(admin, "GET", "/tasks/"+bad.ID+"/runs", "", hx)
	if !strings.Contains(live, `id="health-rate">70%<`) {
		t.Fatal("the task page's live fragment lacks the health")
	}

	_, list := e.do(admin, "GET", "/tasks", "", nil)
	failing := regexp.MustCompile(`<tr id="task-([^"]+)"[^>]*>(?:.(?:[^<]|<[^/]|</[^t]|</t[^r])*?)data-testid="failing" title="last 3 runs failed"`)
	m := failing.FindAllStringSubmatch(list, -1)
	if len(m) != 1 || m[0][1] != bad.ID {
		t.Fatalf("failing markers: %v, want only %s's", m, bad.ID)
	}
	_, rows := e.do(admin, "GET", "/tasks/rows", "", hx)
	if strings.Count(rows, `data-testid="failing"`) != 1 {
		t.Fatal("the list's live rows lack the failing marker")
	}

	// A task without runs: no figures, no chart.
	quiet := e.createTask("quiet", "w1")
	_, page = e.do(admin, "GET", "/tasks/"+quiet.ID, "", nil)
	if !strings.Contains(page, `id="health-none"`) || strings.Contains(page, `id="duration-chart"`) {
		t.Fatal("the page of a task without runs shows figures or a chart")
	}
	_, body = e.do(admin, "GET", "/api/v1/tasks/"+quiet.ID, "", nil)
	if !strings.Contains(body, `"health":{"runs":0,"success_rate":null,"p50_ms":null,"p95_ms":null,"last_failed_streak":0`) {
		t.Fatalf("API task without runs: %s", body)
	}
}
