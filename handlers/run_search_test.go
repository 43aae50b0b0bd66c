package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// bearer stores a new API token and returns its Authorization header.
func (e *env) bearer(name string) map[string]string {
	e.t.Helper()
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := store.CreateToken(context.Background(), e.st.DB, &store.APIToken{Name: name, TokenHash: hash, CreatedBy: "admin"}); err != nil {
		e.t.Fatal(err)
	}
	return map[string]string{"Authorization": "Bearer " + plain}
}

type runsAnswer struct {
	Items []struct {
		ID        string    `json:"id"`
		TaskID    string    `json:"task_id"`
		Node      string    `json:"node"`
		StartedAt time.Time `json:"started_at"`
		Result    string    `json:"result"`
		Output    *string   `json:"output"`
	} `json:"items"`
	Total int `json:"total"`
}

func (a runsAnswer) ids() []string {
	var out []string
	for _, it := range a.Items {
		out = append(out, it.ID)
	}
	return out
}

// seedTaskRuns stores 60 runs of two tasks on two nodes, one a minute back
// from base: every 3rd failed, every 5th (not 3rd) timeout, else success.
func seedTaskRuns(t *testing.T, e *env, base time.Time, tasks [2]string) []store.Run {
	t.Helper()
	var runs []store.Run
	for i := range 60 {
		r := store.Run{ID: fmt.Sprintf("r%03d", i), TaskID: tasks[i%2], Node: []string{"w1", "w2"}[(i/2)%2],
			StartedAt: base.Add(-time.Duration(i) * time.Minute), Result: store.ResultSuccess, Attempt: 1,
			DurationMS: int64(100 + i), Output: "output of " + fmt.Sprint(i)}
		r.ScheduledAt, r.EndedAt = r.StartedAt, r.StartedAt.Add(time.Duration(r.DurationMS)*time.Millisecond)
		switch {
		case i%3 == 0:
			r.Result = store.ResultFailed
		case i%5 == 0:
			r.Result = store.ResultTimeout
		}
		runs = append(runs, r)
	}
	if _, err := store.InsertRuns(context.Background(), e.st.DB, runs); err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestRunSearchAPIFiltersAndValidation: GET /api/v1/runs filters by result,
// node, task and time range, alone and together, pages with limit and offset,
// answers runs in the task runs API's shape, and refuses every bad filter
// with a 400 naming the field. A task's runs filter by result too.
func TestRunSearchAPIFiltersAndValidation(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		e.addOfflineNode("w1")
		e.addOfflineNode("w2")
		alpha, beta := e.createTask("alpha", "w1", "w2"), e.createTask("beta", "w1", "w2")
		base := time.Now().UTC().Truncate(time.Second)
		all := seedTaskRuns(t, e, base, [2]string{alpha.ID, beta.ID})
		tok := e.bearer("ci")
		anon := e.client()
		get := func(path string) runsAnswer {
			t.Helper()
			status, body := e.do(anon, "GET", path, "", tok)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, status, body)
			}
			return decode[runsAnswer](t, body)
		}
		want := func(keep func(r store.Run) bool) []string {
			var out []string
			for _, r := range all {
				if keep(r) {
					out = append(out, r.ID)
				}
			}
			return out
		}
		rfc := func(t time.Time) string { return url.QueryEscape(t.Format(time.RFC3339)) }
		cases := []struct {
			query string
			keep  func(r store.Run) bool
		}{
			{"", func(store.Run) bool { return true }},
			{"result=failed", func(r store.Run) bool { return r.Result == store.ResultFailed }},
			{"result=timeout", func(r store.Run) bool { return r.Result == store.ResultTimeout }},
			{"node=w2", func(r store.Run) bool { return r.Node == "w2" }},
			{"task=" + beta.ID, func(r store.Run) bool { return r.TaskID == beta.ID }},
			{"since=" + rfc(base.Add(-20*time.Minute)) + "&until=" + rfc(base.Add(-10*time.Minute)), func(r store.Run) bool {
				return !r.StartedAt.Before(base.Add(-20*time.Minute)) && r.StartedAt.Before(base.Add(-10*time.Minute))
			}},
			{"result=failed&node=w1&task=" + alpha.ID + "&since=" + rfc(base.Add(-40*time.Minute)), func(r store.Run) bool {
				return r.Result == store.ResultFailed && r.Node == "w1" && r.TaskID == alpha.ID && !r.StartedAt.Before(base.Add(-40*time.Minute))
			}},
			{"node=nobody", func(store.Run) bool { return false }},
		}
		for _, c := range cases {
			w := want(c.keep)
			got := get("/api/v1/runs?limit=500&" + c.query)
			if !slices.Equal(got.ids(), w) || got.Total != len(w) {
				t.Errorf("?%s: %d items (total %d) %v, want %d %v", c.query, len(got.Items), got.Total, got.ids(), len(w), w)
			}
		}
		// Defaults, paging and the shape: output included, as GET /api/v1/tasks/{id}/runs shows it.
		page := get("/api/v1/runs?result=success&limit=4&offset=4")
		succ := want(func(r store.Run) bool { return r.Result == store.ResultSuccess })
		if !slices.Equal(page.ids(), succ[4:8]) || page.Total != len(succ) {
			t.Errorf("page 2 of successes: %v (total %d), want %v (total %d)", page.ids(), page.Total, succ[4:8], len(succ))
		}
		if it := page.Items[0]; it.Output == nil || *it.Output != "output of "+strings.TrimLeft(strings.TrimPrefix(it.ID, "r"), "0") || it.TaskID == "" || it.Node == "" {
			t.Errorf("item shape: %+v", it)
		}
		if got := get("/api/v1/runs"); len(got.Items) != 50 || got.Total != 60 {
			t.Errorf("default page: %d items, total %d; want 50 of 60", len(got.Items), got.Total)
		}

		// Every bad filter is refused with a 400 naming its field.
		for query, field := range map[string]string{
			"result=bogus":               "result",
			"result=SUCCESS":             "result",
			"since=yesterday":            "since",
			"since=2030-01-02T15:04":     "since", // the API wants RFC 3339
			"until=2030-13-01T00:00:00Z": "until",
			"since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z": "until",
			"limit=0":                         "limit",
			"limit=501":                       "limit",
			"limit=x":                         "limit",
			"offset=-1":                       "offset",
			"offset=1e3":                      "offset",
			"node=" + url.QueryEscape("w 1"):  "node",
			"task=" + strings.Repeat("a", 37): "task",
			"task=00000000-0000-0000-0000-000000000000": "task",
		} {
			status, body := e.do(anon, "GET", "/api/v1/runs?"+query, "", tok)
			if status != http.StatusBadRequest || !strings.Contains(body, `"fields":{"`+field+`"`) || !strings.Contains(body, field+": ") {
				t.Errorf("?%s: %d %s; want 400 naming %s", query, status, body, field)
			}
		}
		// Anonymous callers get nothing.
		if status, _ := e.do(anon, "GET", "/api/v1/runs", "", nil); status != http.StatusUnauthorized {
			t.Errorf("anonymous: %d, want 401", status)
		}

		// A task's runs filter by result, and refuse an unknown one.
		var taskRuns runsAnswer
		status, body := e.do(anon, "GET", "/api/v1/tasks/"+alpha.ID+"/runs?result=failed&limit=500", "", tok)
		if status != http.StatusOK {
			t.Fatalf("task runs by result: %d %s", status, body)
		}
		taskRuns = decode[runsAnswer](t, body)
		if w := want(func(r store.Run) bool { return r.TaskID == alpha.ID && r.Result == store.ResultFailed }); !slices.Equal(taskRuns.ids(), w) || taskRuns.Total != len(w) {
			t.Errorf("alpha's failed runs: %v (total %d), want %v", taskRuns.ids(), taskRuns.Total, w)
		}
		if status, body := e.do(anon, "GET", "/api/v1/tasks/"+alpha.ID+"/runs?result=nope", "", tok); status != http.StatusBadRequest || !strings.Contains(body, `"result"`) {
			t.Errorf("task runs, bad result: %d %s", status, body)
		}
	})
}

// TestRunListPageFiltersAndPages: the console's runs page lists every task's
// runs with its filters, its live fragment keeps them and pages, a bad filter
// is refused inline, and the task page's runs panel filters by result.
func TestRunListPageFiltersAndPages(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		e.addOfflineNode("w1")
		e.addOfflineNode("w2")
		alpha, beta := e.createTask("alpha", "w1", "w2"), e.createTask("beta <b>", "w1", "w2")
		base := time.Now().UTC().Truncate(time.Second)
		seedTaskRuns(t, e, base, [2]string{alpha.ID, beta.ID})
		c := e.login("admin", "admin-password-1")

		status, page := e.do(c, "GET", "/runs?result=failed&node=w1", "", nil)
		if status != http.StatusOK {
			t.Fatalf("runs page: %d", status)
		}
		rows := strings.Count(page, `data-result="`)
		if rows != 10 || strings.Count(page, `data-result="failed" data-node="w1"`) != rows {
			t.Errorf("failed runs of w1: %d rows; want 10, all failed on w1", rows)
		}
		for _, want := range []string{`hx-get="/runs/live?node=w1&amp;result=failed"`, `<option value="failed" selected`,
			`href="/tasks/` + alpha.ID + `"`, "beta &lt;b&gt;", `href="/nodes/w1"`, `id="run-list-range"`} {
			if !strings.Contains(page, want) {
				t.Errorf("runs page lacks %s", want)
			}
		}
		// The live fragment pages and keeps the filters.
		status, frag := e.do(c, "GET", "/runs/live?result=success&offset=10", "", hx)
		if status != http.StatusOK || !strings.HasPrefix(strings.TrimSpace(frag), `<div id="runs-list-live"`) ||
			strings.Count(frag, `data-result="success"`) != 22 || !strings.Contains(frag, "11–32 of") ||
			!strings.Contains(frag, `hx-push-url="/runs?result=success"`) || strings.Contains(frag, `id="run-list-next"`) {
			t.Errorf("live fragment, page 2 of successes: %d\n%s", status, frag)
		}
		// Page 1 offers the next page, as a link and as an htmx swap that moves the address.
		if _, frag = e.do(c, "GET", "/runs/live", "", hx); !strings.Contains(frag, `id="run-list-next"`) ||
			!strings.Contains(frag, `hx-push-url="/runs?offset=50"`) || !strings.Contains(frag, `hx-get="/runs/live?offset=50"`) {
			t.Errorf("first page of all runs lacks its pager:\n%s", frag)
		}
		// The task filter suggests tasks by title as one types, never the
		// whole table; the chosen task is offered with its title.
		status, opts := e.do(c, "GET", "/runs/tasks?task=BET", "", hx)
		if status != http.StatusOK || !strings.Contains(opts, `<option value="`+beta.ID+`" label="beta &lt;b&gt;">`) || strings.Contains(opts, alpha.ID) {
			t.Errorf("suggestions for BET: %d\n%s", status, opts)
		}
		if _, opts = e.do(c, "GET", "/runs/tasks?task="+strings.Repeat("x", 201), "", hx); strings.Contains(opts, "<option") {
			t.Errorf("a filter longer than any title suggested: %s", opts)
		}
		if _, page = e.do(c, "GET", "/runs?task="+alpha.ID, "", nil); !strings.Contains(page, `<option value="`+alpha.ID+`" label="alpha">`) ||
			strings.Contains(page, `<option value="`+beta.ID) || !strings.Contains(page, `value="`+alpha.ID+`" placeholder=`) {
			t.Errorf("the runs page of alpha does not offer alpha alone as the chosen task")
		}
		// A bad filter is refused inline and lists nothing.
		status, page = e.do(c, "GET", "/runs?since=soon&result=odd", "", nil)
		if status != http.StatusBadRequest || !strings.Contains(page, `id="error-since"`) || !strings.Contains(page, `id="error-result"`) ||
			strings.Contains(page, `id="runs-list-live"`) {
			t.Errorf("bad filters: %d", status)
		}

		// The task page's runs panel filters by result and keeps it in its poll and pager.
		status, panel := e.do(c, "GET", "/tasks/"+alpha.ID+"/runs?result=timeout", "", hx)
		if status != http.StatusOK || strings.Count(panel, `badge-timeout`) != 4 || strings.Count(panel, `<tr id="run-r`) != 4 ||
			!strings.Contains(panel, `hx-get="/tasks/`+alpha.ID+`/runs?result=timeout"`) {
			t.Errorf("alpha's timeouts: %d\n%s", status, panel)
		}
		if status, _ := e.do(c, "GET", "/tasks/"+alpha.ID+"/runs?result=odd", "", hx); status != http.StatusBadRequest {
			t.Errorf("task runs, bad result: %d, want 400", status)
		}
		_, taskPage := e.do(c, "GET", "/tasks/"+alpha.ID+"?result=failed", "", nil)
		if n := strings.Count(taskPage, `<tr id="run-r`); n != 10 || strings.Contains(taskPage, `badge-success">success`) ||
			!strings.Contains(taskPage, `<option value="failed" selected`) || !strings.Contains(taskPage, `hx-get="/tasks/`+alpha.ID+`/runs" hx-trigger="change"`) {
			t.Errorf("task page with ?result=failed shows %d runs (want its 10 failed ones) or lacks the chosen filter", n)
		}
	})
}
