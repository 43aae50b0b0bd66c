package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

var eventRowRE = regexp.MustCompile(`<tr id="event-(\d+)" data-action="([^"]*)" data-outcome="([^"]*)"`)

// eventRows returns the rows of an event log page as "action/outcome".
func eventRows(body string) []string {
	var out []string
	for _, m := range eventRowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[2]+"/"+m[3])
	}
	return out
}

type eventsPage struct {
	Items []struct {
		ID         int64     `json:"id"`
		At         time.Time `json:"at"`
		Actor      string    `json:"actor"`
		Action     string    `json:"action"`
		TargetType string    `json:"target_type"`
		Target     string    `json:"target"`
		Outcome    string    `json:"outcome"`
		Detail     string    `json:"detail"`
		Master     string    `json:"master"`
	} `json:"items"`
	Total int `json:"total"`
}

func TestEventLogPageAndAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		c := e.login("admin", "admin-password-1")
		// The sign-in is an event (user.login, method local): seen, then
		// set aside so the counts below are the actions'.
		if status, body := e.do(c, "GET", "/api/v1/events?action=user.login", "", nil); status != http.StatusOK || !strings.Contains(body, `"method local"`) {
			t.Fatalf("the admin's sign-in event: %d %s", status, body)
		}
		if _, err := e.st.DB.NewDelete().TableExpr("events").Where("1 = 1").Exec(context.Background()); err != nil {
			t.Fatal(err)
		}

		// Nothing happened yet: the empty state, no pager.
		status, body := e.do(c, "GET", "/events", "", nil)
		if status != http.StatusOK || !strings.Contains(body, "No events yet") || strings.Contains(body, `id="events-next"`) {
			t.Fatalf("empty event log: %d\n%s", status, body)
		}
		if !strings.Contains(body, `href="/events" class="active"`) {
			t.Error("the Events menu entry is not marked active")
		}

		// Real admin actions through the open API: a node, then a refused connect
		// (nothing listens on its port).
		if st, b := e.do(c, "POST", "/api/v1/nodes", `{"name":"w1","host":"127.0.0.1:1"}`, nil); st != http.StatusCreated {
			t.Fatalf("create node: %d %s", st, b)
		}
		if st, b := e.do(c, "POST", "/api/v1/nodes/w1/connect", "", nil); st != http.StatusBadGateway {
			t.Fatalf("connect to a closed port: %d %s", st, b)
		}
		// And 120 older events of a script, one minute apart.
		ctx := context.Background()
		base := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Minute)
		for i := range 120 {
			ev := &store.Event{At: base.Add(time.Duration(i) * time.Minute), Actor: "token:ci", Action: "task.start",
				TargetType: "task", Target: fmt.Sprintf("t%03d", i), Outcome: "ok"}
			if err := store.AddEvent(ctx, e.st.DB, ev); err != nil {
				t.Fatal(err)
			}
		}

		// Page 1: the 50 newest, the admin's two actions first.
		status, body = e.do(c, "GET", "/events", "", nil)
		rows := eventRows(body)
		if status != http.StatusOK || len(rows) != 50 || rows[0] != "node.connect/error" || rows[1] != "node.create/ok" {
			t.Fatalf("page 1: %d, %d rows, first %v", status, len(rows), rows[:min(3, len(rows))])
		}
		if !strings.Contains(body, "1–50 of 122") || !strings.Contains(body, `href="/events?offset=50"`) || strings.Contains(body, `id="events-prev"`) {
			t.Errorf("page 1 pager is wrong")
		}
		if !strings.Contains(body, "t119") || strings.Contains(body, ">t071<") {
			t.Errorf("page 1 does not hold the newest script events (t119 down to t072)")
		}
		if strings.Contains(body, "style=") {
			t.Error("the event log has an inline style attribute (CSP forbids it)")
		}
		// Last page.
		_, body = e.do(c, "GET", "/events?offset=100", "", nil)
		if rows := eventRows(body); len(rows) != 22 || !strings.Contains(body, "101–122 of 122") ||
			!strings.Contains(body, `href="/events?offset=50"`) || strings.Contains(body, `id="events-next"`) {
			t.Errorf("last page: %d rows", len(rows))
		}
		if !strings.Contains(body, ">t000<") {
			t.Error("the last page does not end with the oldest event")
		}

		// Filters, kept in the pager links.
		_, body = e.do(c, "GET", "/events?actor=admin", "", nil)
		if rows := eventRows(body); strings.Join(rows, ",") != "node.connect/error,node.create/ok" {
			t.Errorf("actor filter: %v", rows)
		}
		if !strings.Contains(body, `data-testid="master" title="the master that acted">via master<`) {
			t.Error("the event log does not show which master acted")
		}
		_, body = e.do(c, "GET", "/events?action=node.&outcome=error", "", nil)
		if rows := eventRows(body); len(rows) != 1 || !strings.Contains(body, "127.0.0.1:1") {
			t.Errorf("action prefix and outcome filter: %v; want the refused connect with its error", rows)
		}
		if !strings.Contains(body, `value="node."`) || !strings.Contains(body, `<option value="error" selected`) {
			t.Error("the filter form does not show the filters in force")
		}
		_, body = e.do(c, "GET", "/events?target_type=task&target=t007", "", nil)
		if rows := eventRows(body); len(rows) != 1 {
			t.Errorf("target filter: %v", rows)
		}
		from := base.Add(10 * time.Minute).Format("2006-01-02T15:04")
		to := base.Add(70 * time.Minute).Format("2006-01-02T15:04")
		_, body = e.do(c, "GET", "/events?actor=token:ci&from="+from+"&to="+to, "", nil)
		if rows := eventRows(body); len(rows) != 50 || !strings.Contains(body, "1–50 of 60") {
			t.Errorf("time range: %d rows", len(rows))
		}
		if !strings.Contains(body, "offset=50") || !strings.Contains(body, "actor=token%3Aci") || !strings.Contains(body, "from=") {
			t.Error("the next-page link lost the filters")
		}
		_, body = e.do(c, "GET", "/events?actor=nobody", "", nil)
		if !strings.Contains(body, "No events match these filters") {
			t.Error("no empty state for a filter that matches nothing")
		}

		// Bad filters: 400 with the message next to the field.
		for q, field := range map[string]string{"outcome=maybe": "outcome", "from=yesterday": "from", "target_type=planet": "target_type",
			"from=2030-01-02T10:00&to=2030-01-01T10:00": "to", "offset=-4": "offset"} {
			status, body := e.do(c, "GET", "/events?"+q, "", nil)
			if status != http.StatusBadRequest || (field != "offset" && !strings.Contains(body, `id="error-`+field+`"`)) {
				t.Errorf("%s: %d, want 400 with an inline error on %s", q, status, field)
			}
		}

		// The open API: same filters, JSON, newest first.
		status, body = e.do(c, "GET", "/api/v1/events?actor=token:ci&limit=10&offset=5", "", nil)
		page := decode[eventsPage](t, body)
		if status != http.StatusOK || page.Total != 120 || len(page.Items) != 10 {
			t.Fatalf("API page: %d total %d items %d", status, page.Total, len(page.Items))
		}
		if it := page.Items[0]; it.Target != "t114" || it.Action != "task.start" || it.TargetType != "task" || it.Outcome != "ok" ||
			!it.At.Equal(base.Add(114*time.Minute)) {
			t.Errorf("first API item = %+v, want t114", it)
		}
		_, body = e.do(c, "GET", "/api/v1/events?outcome=error", "", nil)
		page = decode[eventsPage](t, body)
		if page.Total != 1 || page.Items[0].Actor != "admin" || page.Items[0].Action != "node.connect" || page.Items[0].Target != "w1" ||
			!strings.Contains(page.Items[0].Detail, "127.0.0.1:1") || page.Items[0].Master != "master" {
			t.Errorf("API error events = %+v", page)
		}
		from3339 := base.Add(100 * time.Minute).Format(time.RFC3339)
		_, body = e.do(c, "GET", "/api/v1/events?action=task.&from="+from3339, "", nil)
		if page = decode[eventsPage](t, body); page.Total != 20 {
			t.Errorf("API time filter: total %d, want 20", page.Total)
		}
		status, body = e.do(c, "GET", "/api/v1/events?from=soon&limit=10", "", nil)
		if status != http.StatusBadRequest || !strings.Contains(body, `"fields"`) || !strings.Contains(body, `"from"`) {
			t.Errorf("API bad filter: %d %s", status, body)
		}
		if status, _ := e.do(c, "GET", "/api/v1/events?limit=501", "", nil); status != http.StatusBadRequest {
			t.Errorf("API limit 501: %d, want 400", status)
		}

		// A viewer reads the log too.
		e.addUser("vera", "viewer-password-1", store.RoleViewer)
		v := e.login("vera", "viewer-password-1")
		if status, body := e.do(v, "GET", "/events", "", nil); status != http.StatusOK || len(eventRows(body)) != 50 {
			t.Errorf("viewer: %d", status)
		}
		if status, _ := e.do(e.client(), "GET", "/api/v1/events", "", nil); status != http.StatusUnauthorized {
			t.Errorf("anonymous API: %d, want 401", status)
		}
	})
}

var chartDayRE = regexp.MustCompile(`<g class="chart-day" data-day="([0-9-]+)" data-success="(\d+)" data-failed="(\d+)">`)

func idText(body, id string) string {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `">([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		return "<absent>"
	}
	return m[1]
}

func TestDashboardNumbersChartAndFailures(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		c := e.login("admin", "admin-password-1")
		ctx := context.Background()
		db := e.st.DB

		// The login lands on the dashboard, and so does /.
		resp := e.postForm(e.client(), "/login", map[string][]string{"username": {"admin"}, "password": {"admin-password-1"}})
		if loc := resp.Header.Get("Location"); loc != "/dashboard" {
			t.Errorf("after login: Location %q, want /dashboard", loc)
		}
		resp, err := c.Get(e.srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
			t.Errorf("/ answers %d %q, want a redirect to /dashboard", resp.StatusCode, resp.Header.Get("Location"))
		}

		// Empty: zeros, no failure, the chart with 14 empty days.
		status, body := e.do(c, "GET", "/dashboard?range=14d", "", nil)
		if status != http.StatusOK || idText(body, "dash-nodes-running") != "0" || !strings.Contains(body, `id="no-failures"`) ||
			len(chartDayRE.FindAllString(body, -1)) != 14 || !strings.Contains(body, "No runs in the last 14 days") {
			t.Fatalf("empty dashboard: %d\n%s", status, body)
		}

		for i, st := range []store.NodeStatus{store.StatusOffline, store.StatusOffline, store.StatusIdle, store.StatusRunning, store.StatusRunning, store.StatusRunning} {
			n := &store.Node{Name: fmt.Sprintf("w%d", i), Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
				Priority: 1, MaxConcurrency: 1, Status: st, Mode: store.ModeManual}
			if err := store.CreateNode(ctx, db, n); err != nil {
				t.Fatal(err)
			}
		}
		for i, st := range []store.TaskStatus{store.TaskRunning, store.TaskRunning, store.TaskPaused, store.TaskStopped, store.TaskStopped, store.TaskStopped, store.TaskDeleted} {
			tk := &store.Task{ID: fmt.Sprintf("task-%d", i), Title: fmt.Sprintf("Task %d", i), Type: "http", Spec: "{}",
				Keepers: "[]", Children: "[]", Status: st}
			if err := store.CreateTask(ctx, db, tk); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now().UTC()
		today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		seq := 0
		add := func(day, n int, result string) {
			for range n {
				seq++
				at := today.AddDate(0, 0, -day).Add(time.Duration(seq) * time.Second)
				runs = append(runs, store.Run{ID: fmt.Sprintf("run-%03d", seq), TaskID: "task-0", Node: "w3", ScheduledAt: at,
					StartedAt: at, EndedAt: at, Result: result, Attempt: 1, HTTPStatus: 500, Output: "boom " + result})
			}
		}
		add(14, 5, "success") // one day before the chart
		add(13, 1, "failed")  // first day of the chart
		add(1, 4, "success")
		add(1, 8, "failed")
		add(0, 3, "success")
		add(0, 2, "failed")
		add(0, 1, "timeout")
		add(0, 1, "skipped")
		if _, err := store.InsertRuns(ctx, db, runs); err != nil {
			t.Fatal(err)
		}

		status, body = e.do(c, "GET", "/dashboard?range=14d", "", nil)
		if status != http.StatusOK {
			t.Fatalf("dashboard: %d", status)
		}
		for id, want := range map[string]string{
			"dash-nodes-running": "3", "dash-nodes-idle": "1", "dash-nodes-offline": "2",
			"dash-tasks-running": "2", "dash-tasks-paused": "1", "dash-tasks-stopped": "3",
			"dash-today-success": "3", "dash-today-failed": "2", "dash-today-timeout": "1", "dash-today-skipped": "1",
		} {
			if got := idText(body, id); got != want {
				t.Errorf("#%s = %q, want %s", id, got, want)
			}
		}
		if !strings.Contains(body, `href="/dashboard" class="active"`) {
			t.Error("the Dashboard menu entry is not marked active")
		}
		if strings.Contains(body, "style=") {
			t.Error("the dashboard has an inline style attribute (CSP forbids it)")
		}

		// The chart: one bar group per day, oldest first, with the numbers.
		groups := chartDayRE.FindAllStringSubmatch(body, -1)
		if len(groups) != 14 {
			t.Fatalf("chart has %d day groups, want 14", len(groups))
		}
		for i, g := range groups {
			wantDay := today.AddDate(0, 0, i-13).Format(time.DateOnly)
			wantS, wantF := "0", "0"
			switch i {
			case 0:
				wantF = "1"
			case 12:
				wantS, wantF = "4", "8"
			case 13:
				wantS, wantF = "3", "3"
			}
			if g[1] != wantDay || g[2] != wantS || g[3] != wantF {
				t.Errorf("day %d: %s success %s failed %s, want %s %s %s", i, g[1], g[2], g[3], wantDay, wantS, wantF)
			}
		}
		if n := strings.Count(body, `class="bar bar-success"`); n != 2 {
			t.Errorf("%d success bars, want 2", n)
		}
		if n := strings.Count(body, `class="bar bar-failed"`); n != 3 {
			t.Errorf("%d failure bars, want 3", n)
		}
		if n := strings.Count(body, "<title>"); n < 15 {
			t.Errorf("%d <title> elements, want the chart's and one tooltip per day", n)
		}
		if !strings.Contains(body, "<title>"+today.Format("Mon 2006-01-02")+": 7 runs: 3 success, 2 failed, 1 timeout, 1 skipped</title>") {
			t.Error("today's tooltip is missing or wrong")
		}
		if !strings.Contains(body, ">"+today.Format("01-02")+"</text>") {
			t.Error("no day label for today")
		}
		// The value axis: 12 is the peak (yesterday, stacked), so ticks of 3 up to 12.
		if !strings.Contains(body, `class="chart-tick">12</text>`) || strings.Contains(body, `class="chart-tick">15</text>`) || strings.Contains(body, "No runs in the last 14 days") {
			t.Error("the value axis does not reach the peak")
		}

		// The failures of the last 24 hours, grouped by task: the latest
		// failure's output, its error in one line, and the runs filtered to them.
		groups24 := regexp.MustCompile(`<tr id="failures-([^"]+)" data-count="(\d+)"`).FindAllStringSubmatch(body, -1)
		if len(groups24) != 1 || groups24[0][1] != "task-0" {
			t.Fatalf("failure groups = %v, want task-0 alone", groups24)
		}
		if n, _ := strconv.Atoi(groups24[0][2]); n < 3 {
			t.Errorf("task-0 counts %d failures, want at least today's 3", n)
		}
		if !strings.Contains(body, `href="/runs/run-024"`) || !strings.Contains(body, `title="boom timeout"`) || !strings.Contains(body, "HTTP 500") ||
			!strings.Contains(body, `href="/tasks/task-0"`) || !strings.Contains(body, `href="/runs?since=`) || !strings.Contains(body, `task=task-0`) {
			t.Errorf("the failure group lacks its output link, last error, code, task link or runs link")
		}

		// The live part polls itself; htmx gets it alone.
		if !strings.Contains(body, `hx-get="/dashboard/live" hx-trigger="every 5s"`) {
			t.Error("the live block does not poll every 5s")
		}
		for _, path := range []string{"/dashboard/live", "/dashboard"} {
			status, frag := e.do(c, "GET", path, "", map[string]string{"HX-Request": "true"})
			if status != http.StatusOK || strings.Contains(frag, "<html") || !strings.HasPrefix(strings.TrimSpace(frag), `<div id="dash-live"`) ||
				idText(frag, "dash-today-timeout") != "1" || strings.Contains(frag, "<svg") {
				t.Errorf("%s for htmx: %d\n%s", path, status, frag)
			}
		}

		// A viewer sees the same dashboard.
		e.addUser("vera", "viewer-password-1", store.RoleViewer)
		v := e.login("vera", "viewer-password-1")
		if status, body := e.do(v, "GET", "/dashboard", "", nil); status != http.StatusOK || idText(body, "dash-nodes-running") != "3" {
			t.Errorf("viewer dashboard: %d", status)
		}
	})
}
