package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// taskForm is a valid form for an HTTP task on an interval.
func taskForm(title, target string, executors ...string) url.Values {
	return url.Values{
		"title": {title}, "description": {"checks the target"}, "type": {"http"},
		"schedule_kind": {"interval"}, "schedule_every": {"1s"}, "schedule_cron": {""}, "schedule_at": {""},
		"start_at": {""}, "end_at": {""}, "timeout": {"5s"}, "retries": {"0"}, "params": {"REGION=eu\nMODE = fast"},
		"executors": executors, "keepers": {"admin"},
		"http_method": {"GET"}, "http_url": {target}, "http_headers": {"X-A: 1"}, "http_body": {""}, "http_content_type": {""},
		"shell_command": {""}, "shell_args": {""}, "shell_env": {""}, "shell_dir": {""},
	}
}

func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (e *env) tasks() []master.Task {
	e.t.Helper()
	ts, _, err := e.m.Tasks().List(context.Background(), store.TaskFilter{Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

func (e *env) task(id string) *master.Task {
	e.t.Helper()
	t, err := e.m.Tasks().Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get task %s: %v", id, err)
	}
	return t
}

func (e *env) addOfflineNode(name string) {
	e.t.Helper()
	if _, err := e.m.Nodes().Create(context.Background(), protocol.NodeConfig{Name: name, Protocol: "http", Host: "127.0.0.1:1", Priority: 1, MaxConcurrency: 5}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createTask(title string, executors ...string) *master.Task {
	e.t.Helper()
	in := master.TaskInput{TaskDef: protocol.TaskDef{Title: title, Type: "http",
		Schedule: protocol.Schedule{Kind: "cron", Cron: "*/5 * * * * *"},
		HTTP:     &protocol.HTTPSpec{Method: "GET", URL: "http://127.0.0.1:1/x"}}, Executors: executors}
	t, err := e.m.Tasks().Create(context.Background(), in, "admin")
	if err != nil {
		e.t.Fatal(err)
	}
	return t
}

// startRunningWorker serves an auto-registered worker that the master shows as running.
func startRunningWorker(t *testing.T, e *env, name string) *worker.Worker {
	t.Helper()
	w, _ := startWorker(t, worker.Config{Identity: name, AutoRegister: true, MasterURL: e.srv.URL})
	runWorker(t, w)
	if n := e.node(name); n.Status != store.StatusRunning {
		t.Fatalf("worker %s: status %d after registration, want running", name, n.Status)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return w
}

var hx = map[string]string{"HX-Request": "true"}

func TestTaskFormRefusesBadInputAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addOfflineNode("w1")
	c := e.login("admin", "admin-password-1")
	good := taskForm("ping billing", "http://127.0.0.1:9/ping", "w1")
	cases := []struct {
		name  string
		form  url.Values
		field string
		kept  string
	}{
		{"cron garbage", with(good, "schedule_kind", "cron", "schedule_cron", "every now and then"), "schedule-cron", `value="every now and then"`},
		{"invalid URL", with(good, "http_url", "not a url"), "http-url", `value="not a url"`},
		{"unknown method", with(good, "http_method", "FETCH"), "http-method", `<option value="FETCH" selected`},
		{"negative timeout", with(good, "timeout", "-5s"), "timeout", `value="-5s"`},
		{"huge timeout", with(good, "timeout", "1000h"), "timeout", `value="1000h"`},
		{"timeout not a duration", with(good, "timeout", "soon"), "timeout", `value="soon"`},
		{"retries 99", with(good, "retries", "99"), "retries", `value="99"`},
		{"unknown executor", with(good, "executors", "nope"), "executors", `value="nope" checked`},
		{"params line without =", with(good, "params", "A=1\nBROKEN"), "params", "BROKEN"},
		{"header line without :", with(good, "http_headers", "X-A 1"), "http-headers", "X-A 1"},
		{"interval not a duration", with(good, "schedule_every", "2 secs"), "schedule-every", `value="2 secs"`},
		{"once at garbage", with(good, "schedule_kind", "once", "schedule_at", "tomorrow"), "schedule-at", `value="tomorrow"`},
		{"unknown keeper", with(good, "keepers", "admin, ghost"), "keepers", `value="admin, ghost"`},
		{"no title", with(good, "title", " "), "title", ""},
	}
	for _, tc := range cases {
		resp := e.postForm(c, "/tasks", tc.form)
		b := body(t, resp)
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422", tc.name, resp.StatusCode)
			continue
		}
		if !strings.Contains(b, `class="field-error" id="error-`+tc.field+`"`) {
			t.Errorf("%s: no inline error id=error-%s in the form", tc.name, tc.field)
		}
		if tc.kept != "" && !strings.Contains(b, tc.kept) {
			t.Errorf("%s: the form lost what was typed (%s)", tc.name, tc.kept)
		}
		if !strings.Contains(b, `value="ping billing"`) && tc.name != "no title" {
			t.Errorf("%s: the form lost the title", tc.name)
		}
	}
	// Messages are precise.
	resp := e.postForm(c, "/tasks", with(good, "params", "A=1\nBROKEN"))
	if b := body(t, resp); !strings.Contains(b, "line 2 has no &#39;=&#39;") {
		t.Errorf("params error does not name the line")
	}
	resp = e.postForm(c, "/tasks", with(good, "executors", "nope"))
	if b := body(t, resp); !strings.Contains(b, "unknown node &#34;nope&#34;") {
		t.Errorf("executor error does not name the node")
	}
	if n := len(e.tasks()); n != 0 {
		t.Fatalf("refused forms created %d tasks", n)
	}

	// A valid form creates a stopped task and shows it.
	resp = e.postForm(c, "/tasks", good)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("valid form: %d, want 303\n%s", resp.StatusCode, body(t, resp))
	}
	loc := resp.Header.Get("Location")
	ts := e.tasks()
	if len(ts) != 1 || loc != "/tasks/"+ts[0].ID {
		t.Fatalf("after create: %d tasks, redirect %q", len(ts), loc)
	}
	tk := ts[0]
	if tk.Status != store.TaskStopped || tk.Type != "http" || tk.Schedule.Kind != "interval" || time.Duration(tk.Schedule.Every) != time.Second ||
		time.Duration(tk.Timeout) != 5*time.Second || tk.Params["REGION"] != "eu" || tk.Params["MODE"] != "fast" ||
		tk.HTTP.Headers["X-A"] != "1" || len(tk.Executors) != 1 || tk.Executors[0] != "w1" || tk.Keepers[0] != "admin" || tk.CreatedBy != "admin" {
		t.Fatalf("created task %+v", tk)
	}
	status, page := e.do(c, "GET", loc, "", nil)
	if status != 200 || !strings.Contains(page, "ping billing") || !strings.Contains(page, "flash-ok") || !strings.Contains(page, "every 1s") ||
		!strings.Contains(page, `id="run-rows"`) || !strings.Contains(page, `id="task-live" data-live hx-get="/tasks/`+tk.ID+`/runs"`) {
		t.Fatalf("detail after create: %d\n%s", status, page)
	}

	// Editing a stopped task: the form is filled; a bad edit changes nothing.
	status, page = e.do(c, "GET", loc+"/edit", "", nil)
	if status != 200 || !strings.Contains(page, `value="ping billing"`) || !strings.Contains(page, "REGION=eu") ||
		!strings.Contains(page, `value="1s"`) || !strings.Contains(page, `value="w1" checked`) {
		t.Fatalf("edit form: %d\n%s", status, page)
	}
	other := e.createTask("other task", "w1")
	resp = e.postForm(c, loc, with(good, "title", "renamed", "children", tk.ID))
	if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-children"`) ||
		!strings.Contains(b, "cannot be its own child") {
		t.Fatalf("self child: %d", resp.StatusCode)
	}
	resp = e.postForm(c, loc, with(good, "title", "renamed", "retries", "99"))
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad edit: %d", resp.StatusCode)
	}
	if got := e.task(tk.ID); got.Title != "ping billing" || len(got.Children) != 0 || got.Retries != 0 {
		t.Fatalf("refused edits changed the task: %+v", got)
	}
	// A good edit saves and redirects to the task.
	resp = e.postForm(c, loc, with(good, "title", "renamed", "children", other.ID, "schedule_kind", "cron", "schedule_cron", "*/5 * * * * *"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != loc {
		t.Fatalf("good edit: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := e.task(tk.ID); got.Title != "renamed" || len(got.Children) != 1 || got.Children[0] != other.ID || got.Schedule.Cron != "*/5 * * * * *" {
		t.Fatalf("edited task %+v", got)
	}
	_, page = e.do(c, "GET", "/tasks", "", nil)
	if !strings.Contains(page, "cron */5 * * * * *") {
		t.Fatal("the list does not describe the cron schedule")
	}
}

func TestTaskListFiltersPagesAndFragment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addOfflineNode("w1")
	e.addOfflineNode("w2")
	c := e.login("admin", "admin-password-1")

	status, page := e.do(c, "GET", "/tasks", "", nil)
	if status != 200 || !strings.Contains(page, "No tasks yet") || !strings.Contains(page, `href="/tasks" class="active"`) {
		t.Fatalf("empty list: %d", status)
	}

	alpha := e.createTask("alpha billing", "w1")
	beta := e.createTask("beta reports", "w2")
	if err := store.SetTaskStatus(context.Background(), e.st.DB, beta.ID, []store.TaskStatus{store.TaskStopped}, store.TaskPaused); err != nil {
		t.Fatal(err)
	}
	has := func(page string, tk *master.Task) bool { return strings.Contains(page, `id="task-`+tk.ID+`"`) }
	for _, tc := range []struct {
		query       string
		alpha, beta bool
	}{
		{"", true, true},
		{"?title=ALPHA", true, false},
		{"?node=w2", false, true},
		{"?status=2", false, true},
		{"?status=0", true, false},
		{"?status=1", false, false},
		{"?status=0&node=w2", false, false},
	} {
		status, page := e.do(c, "GET", "/tasks"+tc.query, "", nil)
		if status != 200 || has(page, alpha) != tc.alpha || has(page, beta) != tc.beta {
			t.Errorf("/tasks%s: %d alpha %v beta %v, want %v %v", tc.query, status, has(page, alpha), has(page, beta), tc.alpha, tc.beta)
		}
	}
	_, page = e.do(c, "GET", "/tasks?status=1", "", nil)
	if !strings.Contains(page, "No tasks match these filters") || !strings.Contains(page, `<option value="1" selected`) {
		t.Error("filtered empty state or kept filter missing")
	}
	// The list shows columns as the operator needs them.
	_, page = e.do(c, "GET", "/tasks", "", nil)
	for _, want := range []string{"cron */5 * * * * *", "badge-paused", "badge-stopped", `data-action="start" data-task="` + alpha.ID + `"`,
		`data-action="resume" data-task="` + beta.ID + `"`, `data-action="delete" data-task="` + alpha.ID + `"`, `id="new-task"`} {
		if !strings.Contains(page, want) {
			t.Errorf("list lacks %q", want)
		}
	}
	if strings.Contains(page, `data-action="start" data-task="`+beta.ID+`"`) || strings.Contains(page, `data-action="pause" data-task="`+alpha.ID+`"`) {
		t.Error("list offers actions the status does not allow")
	}

	// htmx gets only the live part (rows and pager), which polls with the same filters.
	for _, path := range []string{"/tasks/rows?title=alpha&node=w1", "/tasks?title=alpha&node=w1"} {
		status, frag := e.do(c, "GET", path, "", hx)
		if status != 200 || !strings.HasPrefix(strings.TrimSpace(frag), `<div id="tasks-live"`) || strings.Contains(frag, "<html") ||
			!strings.Contains(frag, `hx-get="/tasks/rows?node=w1&amp;title=alpha"`) || !strings.Contains(frag, `hx-trigger="every 2s"`) ||
			!has(frag, alpha) || has(frag, beta) {
			t.Fatalf("fragment %s: %d %.200q", path, status, frag)
		}
	}
	if status, _ := e.do(c, "GET", "/tasks?status=7", "", nil); status != http.StatusBadRequest {
		t.Errorf("bad status filter: %d, want 400", status)
	}

	// Pages of 50, with links that keep the filters.
	for i := 0; i < 50; i++ {
		e.createTask("bulk "+strconv.Itoa(i), "w1")
	}
	_, page = e.do(c, "GET", "/tasks?node=w1", "", nil)
	if n := strings.Count(page, `<tr id="task-`); n != 50 || !strings.Contains(page, `href="/tasks?node=w1&amp;offset=50"`) || !strings.Contains(page, "1–50 of 51") {
		t.Fatalf("first page: %d rows", n)
	}
	_, page = e.do(c, "GET", "/tasks?node=w1&offset=50", "", nil)
	if n := strings.Count(page, `<tr id="task-`); n != 1 || !strings.Contains(page, `href="/tasks?node=w1"`) || !strings.Contains(page, "51–51 of 51") {
		t.Fatalf("second page: %d rows", n)
	}
}

func TestTaskActionsOnARunningWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pong <b>from target</b>")
	}))
	t.Cleanup(target.Close)
	startRunningWorker(t, e, "w1")
	c := e.login("admin", "admin-password-1")

	resp := e.postForm(c, "/tasks", taskForm("ping target", target.URL+"/ping", "w1"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", resp.StatusCode, body(t, resp))
	}
	id := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	form := taskForm("ping target", target.URL+"/ping", "w1")

	// Start from the list, through htmx: the panel comes back with the message.
	status, panel := e.do(c, "POST", "/tasks/"+id+"/start?title=ping", "", hx)
	if status != 200 || !strings.HasPrefix(strings.TrimSpace(panel), `<div id="tasks-panel"`) || !strings.Contains(panel, "flash-ok") ||
		!strings.Contains(panel, "started") || !strings.Contains(panel, `hx-get="/tasks/rows?title=ping"`) {
		t.Fatalf("start: %d\n%s", status, panel)
	}
	if got := e.task(id); got.Status != store.TaskRunning {
		t.Fatalf("after start: status %d", got.Status)
	}
	_, page := e.do(c, "GET", "/tasks/"+id, "", nil)
	for _, want := range []string{`data-action="pause"`, `data-action="stop"`, `data-action="run"`, "badge-running"} {
		if !strings.Contains(page, want) {
			t.Errorf("running task page lacks %s", want)
		}
	}
	if strings.Contains(page, `data-action="start"`) || strings.Contains(page, `data-action="delete"`) {
		t.Error("running task page offers start or delete")
	}
	// A running task is edited in place: the page offers Edit, the form
	// saves, and the task stays running with the new definition.
	if !strings.Contains(page, `href="/tasks/`+id+`/edit"`) || strings.Contains(page, "Stop the task to edit it.") {
		t.Error("running task page does not offer Edit")
	}
	status, page = e.do(c, "GET", "/tasks/"+id+"/edit", "", nil)
	if status != 200 || strings.Contains(page, `id="form-locked"`) || !strings.Contains(page, `id="task-form"`) {
		t.Fatalf("edit page of a running task: %d", status)
	}
	resp = e.postForm(c, "/tasks/"+id, with(form, "title", "ping target, edited"))
	if b := body(t, resp); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit while running: %d\n%s", resp.StatusCode, b)
	}
	if got := e.task(id); got.Title != "ping target, edited" || got.Status != store.TaskRunning {
		t.Fatalf("after an edit while running: %q %s", got.Title, got.Status)
	}

	// Run once from the task page.
	status, panel = e.do(c, "POST", "/tasks/"+id+"/run?from=detail", "", hx)
	if status != 200 || !strings.HasPrefix(strings.TrimSpace(panel), `<div id="task-panel"`) || !strings.Contains(panel, "one run sent to node w1") {
		t.Fatalf("run once: %d\n%s", status, panel)
	}

	// Runs arrive and show in the live fragment and on the run page.
	var runs []store.Run
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		runs, _, err = e.m.Runs().List(context.Background(), id, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(runs) == 0 {
		t.Fatal("no run recorded within 15s")
	}
	status, frag := e.do(c, "GET", "/tasks/"+id+"/runs", "", hx)
	// The live part of the task page: the summary and the runs panel from one read.
	if status != 200 || !strings.HasPrefix(strings.TrimSpace(frag), `<div id="task-live"`) || !regexp.MustCompile(`id="run-count">[1-9][0-9]*<`).MatchString(frag) || !strings.Contains(frag, `href="/runs/`+runs[0].ID+`"`) ||
		regexp.MustCompile(`id="summary-run-count">[0-9]+<`).FindString(frag) != strings.Replace(regexp.MustCompile(`id="run-count">[0-9]+<`).FindString(frag), "run-count", "summary-run-count", 1) ||
		!strings.Contains(frag, "badge-success") || !strings.Contains(frag, "HTTP 200") {
		t.Fatalf("runs fragment: %d\n%s", status, frag)
	}
	status, page = e.do(c, "GET", "/runs/"+runs[0].ID, "", nil)
	if status != 200 || !regexp.MustCompile(`<pre class="output" id="run-output">[^<]*pong &lt;b&gt;from target&lt;/b&gt;`).MatchString(page) ||
		!strings.Contains(page, "ping target") || !strings.Contains(page, "w1") {
		t.Fatalf("run page: %d\n%s", status, page)
	}

	// Pause without htmx: redirect with the message kept.
	resp = e.postForm(c, "/tasks/"+id+"/pause", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks" {
		t.Fatalf("pause: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = e.do(c, "GET", "/tasks", "", nil)
	if !strings.Contains(page, "flash-ok") || !strings.Contains(page, "paused.") {
		t.Fatal("no flash after a plain-form pause")
	}
	if got := e.task(id); got.Status != store.TaskPaused {
		t.Fatalf("after pause: status %d", got.Status)
	}
	// Pausing again is refused with the reason.
	status, panel = e.do(c, "POST", "/tasks/"+id+"/pause", "", hx)
	if status != http.StatusConflict || !strings.Contains(panel, "flash-error") || !strings.Contains(panel, "cannot pause it") {
		t.Fatalf("pause twice: %d\n%s", status, panel)
	}
	status, panel = e.do(c, "POST", "/tasks/"+id+"/resume?from=detail", "", hx)
	if status != 200 || !strings.Contains(panel, "resumed") || e.task(id).Status != store.TaskRunning {
		t.Fatalf("resume: %d\n%s", status, panel)
	}
	resp = e.postForm(c, "/tasks/"+id+"/stop?from=detail", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks/"+id || e.task(id).Status != store.TaskStopped {
		t.Fatalf("stop: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = e.do(c, "GET", "/tasks/"+id, "", nil)
	if !strings.Contains(page, "stopped.") || !strings.Contains(page, `data-action="start"`) || !strings.Contains(page, `data-action="edit"`) {
		t.Fatal("task page after stop: no message or no Start/Edit")
	}

	// Delete from the task page: htmx is sent to the list, where the task is gone.
	req, _ := http.NewRequest("POST", e.srv.URL+"/tasks/"+id+"/delete?from=detail", nil)
	req.Header.Set("HX-Request", "true")
	dresp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != 200 || dresp.Header.Get("HX-Redirect") != "/tasks" {
		t.Fatalf("delete: %d redirect %q", dresp.StatusCode, dresp.Header.Get("HX-Redirect"))
	}
	_, page = e.do(c, "GET", "/tasks", "", nil)
	if strings.Contains(page, `id="task-`+id+`"`) || !strings.Contains(page, "deleted.") {
		t.Fatal("deleted task still listed, or no message")
	}
	if status, _ := e.do(c, "GET", "/tasks/"+id, "", nil); status != http.StatusNotFound {
		t.Fatalf("deleted task page: %d, want 404", status)
	}
	// Its live fragment answers 404 too, and sends htmx to the list (htmx
	// follows HX-Redirect whatever the status).
	for _, path := range []string{"/tasks/" + id + "/runs", "/tasks/no-such-task/runs"} {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set("HX-Request", "true")
		fresp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		fresp.Body.Close()
		if fresp.StatusCode != http.StatusNotFound || fresp.Header.Get("HX-Redirect") != "/tasks" {
			t.Fatalf("live fragment %s of a missing task: %d redirect %q, want 404 to /tasks", path, fresp.StatusCode, fresp.Header.Get("HX-Redirect"))
		}
	}
	// The run page still works for a deleted task's runs.
	if status, page := e.do(c, "GET", "/runs/"+runs[0].ID, "", nil); status != 200 || !strings.Contains(page, "(deleted)") {
		t.Fatalf("run of a deleted task: %d", status)
	}
}

func TestTaskActionErrorsNameTheNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	startRunningWorker(t, e, "w1")
	e.addOfflineNode("off1")
	// A node the master believes running, whose worker is gone.
	dead := &store.Node{Name: "dead", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Secret: "x", Status: store.StatusRunning,
		DesiredStatus: store.StatusRunning, Priority: 1, MaxConcurrency: 5, Mode: store.ModeAuto}
	if err := store.CreateNode(context.Background(), e.st.DB, dead); err != nil {
		t.Fatal(err)
	}
	c := e.login("admin", "admin-password-1")

	noWorker := e.createTask("nobody runs me", "off1")
	status, panel := e.do(c, "POST", "/tasks/"+noWorker.ID+"/start", "", hx)
	if status != http.StatusConflict || !strings.Contains(panel, "flash-error") || !strings.Contains(panel, "no running worker for this task") {
		t.Fatalf("start without a running executor: %d\n%s", status, panel)
	}
	both := e.createTask("half dead", "dead", "w1")
	status, panel = e.do(c, "POST", "/tasks/"+both.ID+"/start", "", hx)
	if status != http.StatusBadGateway || !strings.Contains(panel, "flash-error") || !strings.Contains(panel, "on node dead") {
		t.Fatalf("start with a dead executor: %d\n%s", status, panel)
	}
	if got := e.task(both.ID); got.Status != store.TaskStopped {
		t.Fatalf("a failed start left the task %d", got.Status)
	}
	// Without htmx the message survives the redirect.
	resp := e.postForm(c, "/tasks/"+both.ID+"/start?from=detail", nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("plain start: %d", resp.StatusCode)
	}
	_, page := e.do(c, "GET", "/tasks/"+both.ID, "", nil)
	if !strings.Contains(page, "flash-error") || !strings.Contains(page, "on node dead") {
		t.Fatal("the task page does not show why the start failed")
	}
	if status, _ := e.do(c, "POST", "/tasks/no-such-task/start", "", hx); status != http.StatusNotFound {
		t.Fatalf("start of an unknown task: %d, want 404", status)
	}
}

func TestViewerSeesTasksButNoActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addOfflineNode("w1")
	tk := e.createTask("visible task", "w1")
	e.addUser("viewer", "viewer-password", store.RoleViewer)
	c := e.login("viewer", "viewer-password")
	for _, path := range []string{"/tasks", "/tasks/" + tk.ID, "/tasks/rows"} {
		status, page := e.do(c, "GET", path, "", nil)
		if status != 200 || !strings.Contains(page, "visible task") || strings.Contains(page, "data-action=") ||
			strings.Contains(page, `id="new-task"`) || strings.Contains(page, "<form method=\"post\" action=\"/tasks") {
			t.Errorf("viewer %s: %d; must show the task without actions", path, status)
		}
	}
	for _, path := range []string{"/tasks/new", "/tasks/" + tk.ID + "/edit"} {
		if status, _ := e.do(c, "GET", path, "", nil); status != http.StatusForbidden {
			t.Errorf("viewer GET %s: %d, want 403", path, status)
		}
	}
	resp := e.postForm(c, "/tasks", taskForm("sneaky", "http://127.0.0.1:9/x", "w1"))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer POST /tasks: %d, want 403", resp.StatusCode)
	}
	for _, a := range []string{"", "/start", "/run", "/delete"} {
		if resp := e.postForm(c, "/tasks/"+tk.ID+a, taskForm("renamed", "http://127.0.0.1:9/x", "w1")); resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer POST /tasks/{id}%s: %d, want 403", a, resp.StatusCode)
		}
	}
	if ts := e.tasks(); len(ts) != 1 || ts[0].Title != "visible task" || ts[0].Status != store.TaskStopped {
		t.Fatalf("viewer changed tasks: %+v", ts)
	}
}

func TestTaskPagesHaveNoInlineScriptOrStyle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addOfflineNode("w1")
	tk := e.createTask("csp task", "w1")
	c := e.login("admin", "admin-password-1")
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>|\sstyle=|\sonclick=|\son[a-z]+="`)
	for _, path := range []string{"/tasks", "/tasks/new", "/tasks/" + tk.ID, "/tasks/" + tk.ID + "/edit"} {
		status, page := e.do(c, "GET", path, "", nil)
		if status != 200 || inline.MatchString(page) {
			t.Errorf("%s: %d, inline script or style present", path, status)
		}
	}
	// Every form control has a label.
	_, page := e.do(c, "GET", "/tasks/new", "", nil)
	for _, m := range regexp.MustCompile(`<(?:input|select|textarea)[^>]* id="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(page, `for="`+m[1]+`"`) {
			t.Errorf("form control %s has no label", m[1])
		}
	}
}
