package handlers_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

var (
	formInput    = regexp.MustCompile(`<input\b[^>]*>`)
	formTextarea = regexp.MustCompile(`(?s)<textarea\b([^>]*)>(.*?)</textarea>`)
	formSelect   = regexp.MustCompile(`(?s)<select\b([^>]*)>(.*?)</select>`)
	formSelected = regexp.MustCompile(`<option value="([^"]*)" selected`)
	formAttr     = regexp.MustCompile(`\s(name|value|type|checked)(?:="([^"]*)")?`)
)

// formValues reads the values a browser would submit from the form with id
// in page: its inputs (checked boxes only), textareas and selects.
func formValues(t *testing.T, page, id string) url.Values {
	t.Helper()
	start := strings.Index(page, `<form method="post" id="`+id+`"`)
	if start < 0 {
		t.Fatalf("no form %s in the page", id)
	}
	form := page[start : start+strings.Index(page[start:], "</form>")]
	attrs := func(tag string) map[string]string {
		out := map[string]string{}
		for _, m := range formAttr.FindAllStringSubmatch(tag, -1) {
			if _, seen := out[m[1]]; !seen {
				out[m[1]] = html.UnescapeString(m[2])
			}
		}
		return out
	}
	v := url.Values{}
	for _, tag := range formInput.FindAllString(form, -1) {
		a := attrs(tag)
		_, checked := a["checked"]
		if a["name"] == "" || (a["type"] == "checkbox" && !checked) {
			continue
		}
		v.Add(a["name"], a["value"])
	}
	for _, m := range formTextarea.FindAllStringSubmatch(form, -1) {
		v.Add(attrs(m[1])["name"], html.UnescapeString(m[2]))
	}
	for _, m := range formSelect.FindAllStringSubmatch(form, -1) {
		if sel := formSelected.FindStringSubmatch(m[2]); sel != nil {
			v.Add(attrs(m[1])["name"], html.UnescapeString(sel[1]))
		}
	}
	return v
}

// TestCloneTask: the clone form is the task's definition titled "… (copy)",
// its secrets masked; saved as shown it makes a new stopped task that keeps
// the original's secret values, and a value typed anew replaces one. The API
// clone copies everything, secrets included, and answers the new task
// masked. The mask stands for a stored value only in a clone of that task.
func TestCloneTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	startRunningWorker(t, e, "w1")
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	secrets := []string{"Bearer x-secret-1", "custom-secret-2", "url-secret-3", "param-secret-4"}
	st, created := e.do(admin, "POST", "/api/v1/tasks", `{"title":"hook","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},
		"http":{"method":"POST","url":"http://bob:url-secret-3@127.0.0.1:1/hook","body":"{\"a\":1}","content_type":"application/json",
			"headers":{"Authorization":"Bearer x-secret-1","X-Custom":"custom-secret-2","X-Plain":"plain-value"},"secret_headers":["X-Custom"]},
		"params":{"TOKEN":"param-secret-4","MODE":"fast"},"secret_params":["TOKEN"],"executors":["w1"],"keepers":["admin"],
		"timeout":"7s","retries":2,"overlap":"skip","timezone":"Europe/Berlin"}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("create task: %d %s", st, created)
	}
	orig := decode[struct {
		ID string `json:"id"`
	}](t, created).ID
	if _, err := e.m.Tasks().Start(context.Background(), orig); err != nil {
		t.Fatal(err) // a running task can be cloned too
	}
	spec := func(id string) protocol.TaskDef {
		t.Helper()
		row, err := store.GetTask(context.Background(), e.st.DB, id)
		if err != nil {
			t.Fatal(err)
		}
		return decode[protocol.TaskDef](t, row.Spec)
	}
	noSecrets := func(what, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Fatalf("%s shows the secret %q", what, s)
			}
		}
	}
	// sameDef: everything but the id and title is the original's.
	sameDef := func(what string, got protocol.TaskDef) {
		t.Helper()
		want := spec(orig)
		got.ID, got.Title, want.ID, want.Title = "", "", "", ""
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
		}
	}

	// The task page offers Clone to admins only.
	_, page := e.do(admin, "GET", "/tasks/"+orig, "", nil)
	if !strings.Contains(page, `href="/tasks/`+orig+`/clone" id="clone-task"`) {
		t.Fatal("the task page lacks the Clone button")
	}
	if _, page := e.do(viewer, "GET", "/tasks/"+orig, "", nil); strings.Contains(page, "clone-task") {
		t.Fatal("a viewer is offered Clone")
	}
	if st, _ := e.do(viewer, "GET", "/tasks/"+orig+"/clone", "", nil); st != http.StatusForbidden {
		t.Fatalf("viewer clone form: %d, want 403", st)
	}

	// The clone form: prefilled, masked, titled as a copy.
	st, form := e.do(admin, "GET", "/tasks/"+orig+"/clone", "", nil)
	if st != http.StatusOK {
		t.Fatalf("clone form: %d", st)
	}
	noSecrets("clone form", form)
	vals := formValues(t, form, "task-form")
	if vals.Get("title") != "hook (copy)" || vals.Get("clone_of") != orig || vals.Get("http_url") != "http://bob:"+protocol.SecretMask+"@127.0.0.1:1/hook" ||
		!strings.Contains(vals.Get("http_headers"), "Authorization: "+protocol.SecretMask) || vals.Get("timeout") != "7s" || vals.Get("overlap") != "skip" ||
		vals["executors"][0] != "w1" || vals.Get("timezone") != "Europe/Berlin" {
		t.Fatalf("clone form values: %v", vals)
	}
	if !strings.Contains(form, `id="clone-of">copy of hook<`) {
		t.Fatal("the clone form does not say what it copies")
	}

	// Saved as shown: a new stopped task with the original's secrets.
	resp := e.postForm(admin, "/tasks", vals)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save the clone: %d %s", resp.StatusCode, flashOf(body(t, resp)))
	}
	copyID := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	if copyID == orig || copyID == "" {
		t.Fatalf("save the clone went to %q", resp.Header.Get("Location"))
	}
	cp := e.task(copyID)
	if cp.Title != "hook (copy)" || cp.Status != store.TaskStopped || len(cp.Executors) != 1 || cp.Keepers[0] != "admin" {
		t.Fatalf("the clone: %+v", cp)
	}
	sameDef("the console clone", spec(copyID))
	if e.task(orig).Status != store.TaskRunning {
		t.Fatal("cloning changed the original")
	}

	// A secret typed anew in the clone form replaces the original's.
	vals.Set("http_headers", "Authorization: Bearer fresh-6\nX-Custom: "+protocol.SecretMask+"\nX-Plain: plain-value")
	vals.Set("title", "hook fresh")
	resp = e.postForm(admin, "/tasks", vals)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save the second clone: %d", resp.StatusCode)
	}
	fresh := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	if h := spec(fresh).HTTP.Headers; h["Authorization"] != "Bearer fresh-6" || h["X-Custom"] != "custom-secret-2" {
		t.Fatalf("second clone's headers: %v", h)
	}

	// Without clone_of the mask is a value like any other: no secret leaks
	// from a task the form does not copy.
	vals.Del("clone_of")
	vals.Set("title", "not a clone")
	if resp := e.postForm(admin, "/tasks", vals); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save a plain new task: %d", resp.StatusCode)
	}
	for _, tk := range e.tasks() {
		if tk.Title == "not a clone" {
			if h := spec(tk.ID).HTTP.Headers; h["X-Custom"] != protocol.SecretMask {
				t.Fatalf("a plain new task got another task's secret: %v", h)
			}
		}
	}

	// The API clone: everything copied, answered masked, stopped.
	st, body := e.do(admin, "POST", "/api/v1/tasks/"+orig+"/clone", "", nil)
	if st != http.StatusCreated {
		t.Fatalf("API clone: %d %s", st, body)
	}
	noSecrets("API clone answer", body)
	api := decode[struct {
		ID     string `json:"id"`
		Title  string `json:"title"`
		Status int    `json:"status"`
	}](t, body)
	if api.Title != "hook (copy)" || api.Status != 0 || api.ID == orig || !strings.Contains(body, protocol.SecretMask) {
		t.Fatalf("API clone answer: %s", body)
	}
	sameDef("the API clone", spec(api.ID))

	// A long title still fits once marked as a copy; unknown tasks and viewers are refused.
	long := strings.Repeat("é", protocol.MaxTitleLen) // characters, not bytes
	st, body = e.do(admin, "POST", "/api/v1/tasks", `{"title":"`+long+`","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},
		"http":{"method":"GET","url":"http://127.0.0.1:1/x"},"executors":["w1"]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("create long: %d %s", st, body)
	}
	longID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	st, body = e.do(admin, "POST", "/api/v1/tasks/"+longID+"/clone", "", nil)
	title := decode[struct {
		Title string `json:"title"`
	}](t, body).Title
	if st != http.StatusCreated || utf8.RuneCountInString(title) != protocol.MaxTitleLen || !strings.HasSuffix(title, "é (copy)") {
		t.Fatalf("clone of a long title: %d %q (%d bytes)", st, title, len(title))
	}
	if st, _ := e.do(admin, "POST", "/api/v1/tasks/no-such-task/clone", "", nil); st != http.StatusNotFound {
		t.Fatalf("clone of an unknown task: %d, want 404", st)
	}
	n := len(e.tasks())
	if st, _ := e.do(viewer, "POST", "/api/v1/tasks/"+orig+"/clone", "", nil); st != http.StatusForbidden {
		t.Fatalf("viewer API clone: %d, want 403", st)
	}
	if len(e.tasks()) != n {
		t.Fatal("a refused clone made a task")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
