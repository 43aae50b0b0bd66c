package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// statuses gives each task's status name, "gone" for a deleted one.
func (e *env) statuses(ids ...string) string {
	e.t.Helper()
	var out []string
	for _, id := range ids {
		t, err := e.m.Tasks().Get(context.Background(), id)
		switch {
		case err == nil:
			out = append(out, t.Status.String())
		case strings.Contains(err.Error(), "does not exist"):
			out = append(out, "gone")
		default:
			e.t.Fatal(err)
		}
	}
	return strings.Join(out, " ")
}

// startedTask creates a task on the executors and starts it.
func (e *env) startedTask(title string, executors ...string) *master.Task {
	e.t.Helper()
	t := e.createTask(title, executors...)
	if _, err := e.m.Tasks().Start(context.Background(), t.ID); err != nil {
		e.t.Fatalf("start %s: %v", title, err)
	}
	return t
}

// unreachableRunningTask is a task the database says runs on a running
// worker that does not answer: any action on it fails at the worker.
func (e *env) unreachableRunningTask(title string) *master.Task {
	e.t.Helper()
	ctx := context.Background()
	e.addOfflineNode("deaf")
	if _, err := e.st.DB.NewUpdate().Table("nodes").Set("status = ?", store.StatusRunning).Where("name = ?", "deaf").Exec(ctx); err != nil {
		e.t.Fatal(err)
	}
	t := e.createTask(title, "deaf")
	if err := store.SetTaskStatus(ctx, e.st.DB, t.ID, []store.TaskStatus{store.TaskStopped}, store.TaskRunning); err != nil {
		e.t.Fatal(err)
	}
	return t
}

// postFormHX posts a form as htmx does.
func (e *env) postFormHX(c *http.Client, path string, v url.Values) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(v.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// flashOf is the text of the toast in a page or fragment.
func flashOf(page string) string {
	i := strings.Index(page, `<p class="flash`)
	if i < 0 {
		return ""
	}
	s := page[i:]
	s = s[strings.Index(s, ">")+1:]
	return html.UnescapeString(s[:strings.Index(s, "<")])
}

func bulkForm(action string, ids ...string) url.Values {
	return url.Values{"action": {action}, "ids": ids}
}

// TestBulkTasksConsole: one POST acts on each selected task on its own and
// one message names the outcome of each: done, refused (status, unknown id)
// or failed at a worker, which never blocks the others; a bad request
// (unknown action, nothing selected) changes nothing
// and answers 400; viewers see no checkboxes and are refused with 403.
func TestBulkTasksConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	startRunningWorker(t, e, "w1")
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	a, b, c := e.startedTask("backup", "w1"), e.startedTask("report", "w1"), e.startedTask("sync", "w1")
	d := e.createTask("ping", "w1")
	deaf := e.unreachableRunningTask("deaf hook")
	ids := []string{a.ID, b.ID, c.ID, d.ID, deaf.ID}

	// The list offers the bulk form and a checkbox per row, kept across refreshes.
	_, page := e.do(admin, "GET", "/tasks", "", nil)
	if !strings.Contains(page, `id="bulk-form"`) || !strings.Contains(page, `id="select-all"`) ||
		strings.Count(page, `class="row-select"`) != 5 || !strings.Contains(page, `id="select-`+a.ID+`" name="ids" value="`+a.ID+`" form="bulk-form" hx-preserve="true"`) {
		t.Fatal("the admin's task list lacks the bulk form or its checkboxes")
	}
	_, rows := e.do(admin, "GET", "/tasks/rows", "", hx)
	if strings.Count(rows, `hx-preserve="true"`) != 5 || strings.Contains(rows, `id="bulk-form"`) {
		t.Fatal("the live rows must carry the preserved checkboxes, and not the bulk form")
	}

	resp := e.postFormHX(admin, "/tasks/bulk", bulkForm("pause", a.ID, b.ID, d.ID, "ghost-id", deaf.ID, a.ID))
	got := flashOf(body(t, resp))
	want := "Paused 2 of 5: backup, report; pause refused for ping: it is stopped — only a running task can be paused; " +
		"pause refused for ghost-id: no such task; pause failed for deaf hook: "
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(got, want) || !strings.Contains(got, "deaf") {
		t.Fatalf("pause: %d %q\nwant it to start with %q", resp.StatusCode, got, want)
	}
	t.Logf("bulk pause says: %s", got)
	if st := e.statuses(ids...); st != "paused paused running stopped running" {
		t.Fatalf("after the bulk pause: %s", st)
	}

	resp = e.postFormHX(admin, "/tasks/bulk", bulkForm("delete", a.ID, d.ID))
	got = flashOf(body(t, resp))
	if want := "Deleted 1 of 2: ping; delete refused for backup: it is paused — stop it first"; got != want {
		t.Fatalf("delete: %q, want %q", got, want)
	}
	if st := e.statuses(a.ID, d.ID); st != "paused gone" {
		t.Fatalf("after the bulk delete: %s", st)
	}
	resp = e.postFormHX(admin, "/tasks/bulk", bulkForm("resume", a.ID, b.ID))
	if got := flashOf(body(t, resp)); got != "Resumed 2 of 2: backup, report" {
		t.Fatalf("resume: %q", got)
	}
	resp = e.postFormHX(admin, "/tasks/bulk", bulkForm("stop", a.ID, b.ID, c.ID))
	if got := flashOf(body(t, resp)); got != "Stopped 3 of 3: backup, report, sync" {
		t.Fatalf("stop: %q", got)
	}
	if st := e.statuses(a.ID, b.ID, c.ID); st != "stopped stopped stopped" {
		t.Fatalf("after resume and stop: %s", st)
	}

	// Refused as a whole: nothing changes, 400 with the reason.
	before := e.statuses(ids...)
	// The bound (master.MaxBulkTasks, 10,000) is the form parser's own
	// bound on fields; the API test sends more.
	many := make([]string, 500)
	for i := range many {
		many[i] = fmt.Sprintf("id-%d", i)
	}
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"unknown action", bulkForm("explode", a.ID), `unknown action "explode"`},
		{"no action", bulkForm("", a.ID), "unknown action"},
		{"nothing selected", bulkForm("pause"), "select at least one task"},
	} {
		for _, hdr := range []bool{true, false} {
			var resp *http.Response
			if hdr {
				resp = e.postFormHX(admin, "/tasks/bulk", tc.form)
			} else {
				resp = e.postForm(admin, "/tasks/bulk", tc.form)
			}
			got := flashOf(body(t, resp))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "Nothing was done") {
				t.Errorf("%s (htmx %v): %d %q, want 400 saying %q", tc.name, hdr, resp.StatusCode, got, tc.want)
			}
		}
	}
	// 500 is the bound: unknown ids are each reported.
	resp = e.postFormHX(admin, "/tasks/bulk", bulkForm("pause", many[:500]...))
	got = flashOf(body(t, resp))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(got, "Paused 0 of 500; pause refused for id-0: no such task") ||
		!strings.HasSuffix(got, "and 488 more not paused") {
		t.Fatalf("500 unknown ids: %d %q", resp.StatusCode, got)
	}
	if st := e.statuses(ids...); st != before {
		t.Fatalf("refused bulk requests changed %s into %s", before, st)
	}

	// Without htmx: the list again, with the message.
	resp = e.postForm(admin, "/tasks/bulk?status=0", bulkForm("delete", b.ID))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks?status=0" {
		t.Fatalf("plain post: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = e.do(admin, "GET", "/tasks?status=0", "", nil)
	if got := flashOf(page); got != "Deleted 1 of 1: report" {
		t.Fatalf("the list after a plain post says %q", got)
	}

	// Viewers: no checkboxes, no bulk form, and the POST is refused.
	_, page = e.do(viewer, "GET", "/tasks", "", nil)
	if strings.Contains(page, "row-select") || strings.Contains(page, "bulk-form") || strings.Contains(page, "data-bulk") {
		t.Fatal("a viewer's task list offers bulk actions")
	}
	before = e.statuses(a.ID, c.ID)
	resp = e.postFormHX(viewer, "/tasks/bulk", bulkForm("delete", a.ID, c.ID))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer bulk delete: %d, want 403", resp.StatusCode)
	}
	if st := e.statuses(a.ID, c.ID); st != before {
		t.Fatalf("a viewer's bulk delete changed %s into %s", before, st)
	}
}

// TestBulkTasksAPI: POST /api/v1/tasks/bulk answers the outcome per task in
// the order asked, unknown ids included; a bad request is 400 and changes
// nothing; viewers get 403.
func TestBulkTasksAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	startRunningWorker(t, e, "w1")
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	a, b := e.startedTask("alpha", "w1"), e.createTask("beta", "w1")

	st, body := e.do(admin, "POST", "/api/v1/tasks/bulk", `{"action":"stop","ids":["`+a.ID+`","nope","`+b.ID+`"]}`, nil)
	if st != http.StatusOK {
		t.Fatalf("bulk stop: %d %s", st, body)
	}
	var out struct {
		Results []struct {
			ID    string  `json:"id"`
			OK    bool    `json:"ok"`
			Error *string `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	r := out.Results
	if len(r) != 3 || r[0].ID != a.ID || !r[0].OK || r[0].Error == nil || *r[0].Error != "" ||
		r[1].ID != "nope" || r[1].OK || *r[1].Error != "no such task" ||
		r[2].ID != b.ID || r[2].OK || *r[2].Error != "it is already stopped" {
		t.Fatalf("results: %s", body)
	}
	if s := e.statuses(a.ID, b.ID); s != "stopped stopped" {
		t.Fatalf("after the API bulk stop: %s", s)
	}
	if st, body := e.do(admin, "POST", "/api/v1/tasks/bulk", `{"action":"delete","ids":["`+a.ID+`","`+b.ID+`"]}`, nil); st != http.StatusOK ||
		strings.Count(body, `"ok":true`) != 2 {
		t.Fatalf("bulk delete: %d %s", st, body)
	}
	if s := e.statuses(a.ID, b.ID); s != "gone gone" {
		t.Fatalf("after the API bulk delete: %s", s)
	}

	c := e.createTask("gamma", "w1")
	var quoted []string
	for i := range master.MaxBulkTasks {
		quoted = append(quoted, fmt.Sprintf(`"id-%d"`, i))
	}
	many := strings.Join(quoted, ",")
	for _, tc := range []struct{ name, body, want string }{
		{"unknown action", `{"action":"nuke","ids":["` + c.ID + `"]}`, "unknown action"},
		{"no ids", `{"action":"delete","ids":[]}`, "select at least one task"},
		{"10,001 ids", `{"action":"delete","ids":["` + c.ID + `",` + many + `]}`, "at most 10000"},
		{"unknown field", `{"action":"delete","ids":["` + c.ID + `"],"force":true}`, "invalid JSON"},
	} {
		st, body := e.do(admin, "POST", "/api/v1/tasks/bulk", tc.body, nil)
		if st != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.name, st, body, tc.want)
		}
	}
	if st, body := e.do(viewer, "POST", "/api/v1/tasks/bulk", `{"action":"delete","ids":["`+c.ID+`"]}`, nil); st != http.StatusForbidden {
		t.Fatalf("viewer: %d %s, want 403", st, body)
	}
	if s := e.statuses(c.ID); s != "stopped" {
		t.Fatalf("refused bulk requests changed gamma: %s", s)
	}
}

// TestBulkSaveAndDelayedBatchAPI: POST /api/v1/tasks/bulk with tasks
// creates and starts each valid one and answers each refusal with its
// fields, in order; POST /api/v1/delayed/batch does the same for delayed
// tasks; a request naming both tasks and an action, or none, is a 400.
func TestBulkSaveAndDelayedBatchAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	startRunningWorker(t, e, "w1")
	admin := e.login("admin", "admin-password-1")
	good := `{"title":"bulk a","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"url":"http://127.0.0.1:1/"},"executors":["w1"]}`
	ghost := `{"title":"bulk b","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"url":"http://127.0.0.1:1/"},"executors":["ghost"]}`
	st, body := e.do(admin, "POST", "/api/v1/tasks/bulk", `{"start":true,"tasks":[`+good+`,`+ghost+`,{"title":""}]}`, nil)
	var out struct {
		Results []master.SaveResult `json:"results"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || len(out.Results) != 3 {
		t.Fatalf("bulk save: %d %s", st, body)
	}
	r := out.Results
	if !r[0].OK || !r[0].Started || r[0].ID == "" || r[1].OK || !strings.Contains(r[1].Fields["executors"], "unknown node") ||
		r[2].OK || r[2].Fields["title"] == "" || r[2].Index != 2 {
		t.Fatalf("bulk save results: %s", body)
	}
	if s := e.statuses(r[0].ID); s != "running" {
		t.Fatalf("the saved task is %s", s)
	}
	for _, bad := range []string{`{"action":"stop","ids":["x"],"tasks":[]}`, `{"tasks":[]}`, `{"action":"start"}`} {
		if st, body := e.do(admin, "POST", "/api/v1/tasks/bulk", bad, nil); st != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", bad, st, body)
		}
	}
	st, body = e.do(admin, "POST", "/api/v1/delayed/batch", `{"tasks":[{"source_app":"app","topic":"t","content_key":"k1","delay":"1h",
"notify_url":"http://127.0.0.1:1/x","executors":["w1"]},{"source_app":"app","topic":"t","content_key":"k1","delay":"1h",
"notify_url":"http://127.0.0.1:1/x","executors":["w1"]},{"source_app":""}]}`, nil)
	var dout struct {
		Results []master.DelayedBatchResult `json:"results"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &dout) != nil || len(dout.Results) != 3 {
		t.Fatalf("delayed batch: %d %s", st, body)
	}
	d := dout.Results
	if !d[0].Created || !d[1].OK || d[1].Created || d[1].ID != d[0].ID || d[2].OK || d[2].Fields["source_app"] == "" {
		t.Fatalf("delayed batch results: %s", body)
	}
	if st, body := e.do(admin, "POST", "/api/v1/delayed/batch", `{"tasks":[]}`, nil); st != http.StatusBadRequest {
		t.Errorf("empty batch: %d %s, want 400", st, body)
	}
}
