package handlers_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

var (
	docsHrefRE = regexp.MustCompile(`href="(/docs[^"#]*)(?:#([^"]*))?"`)
	mdHrefRE   = regexp.MustCompile(`href="[^"]*\.md(?:#[^"]*)?"`)
)

// The manual at /docs: the index and a page render inside the console for a
// signed-in user, with the page's h1, its headings' anchors and links
// between pages that lead to pages (and anchors) that exist.
func TestDocsServeTheManual(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")

	status, index := e.do(c, "GET", "/docs", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /docs: %d %.300s", status, index)
	}
	for _, want := range []string{">ScheduleMaster for Go: the manual</h1>", `<title>ScheduleMaster for Go: the manual · ScheduleMaster</title>`,
		`href="/docs/tasks"`, `href="/docs/concepts"`, `href="/docs/reference/flags"`, `id="manual"`, `lang="en"`, `id="help-link"`} {
		if !strings.Contains(index, want) {
			t.Errorf("GET /docs lacks %s", want)
		}
	}

	status, tasks := e.do(c, "GET", "/docs/tasks", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /docs/tasks: %d %.300s", status, tasks)
	}
	if !strings.Contains(tasks, ">Tasks</h1>") {
		t.Errorf("GET /docs/tasks has no h1 Tasks: %.500s", tasks)
	}
	if status, body := e.do(c, "GET", "/docs/configuration", "", nil); status != http.StatusOK || !strings.Contains(body, "<table>") {
		t.Errorf("GET /docs/configuration: %d, want its tables (GitHub's Markdown): %.300s", status, body)
	}
	// The roles table aligns its columns: with attributes, never a style
	// attribute, which the console's CSP refuses.
	if status, body := e.do(c, "GET", "/docs/teams", "", nil); status != http.StatusOK || !strings.Contains(body, ` align="`) || strings.Contains(body, ` style="`) {
		t.Errorf("GET /docs/teams: %d, want aligned cells without a style attribute", status)
	}
	for _, page := range []string{index, tasks} {
		if m := mdHrefRE.FindString(page); m != "" {
			t.Errorf("a link to a Markdown file is left as it is: %s", m)
		}
	}

	// Every link between pages leads to a page, and its #fragment to an id
	// of that page.
	pages := map[string]string{"/docs": index, "/docs/tasks": tasks}
	checked := 0
	for _, page := range []string{index, tasks} {
		for _, m := range docsHrefRE.FindAllStringSubmatch(page, -1) {
			path, fragment := m[1], m[2]
			body, ok := pages[path]
			if !ok {
				var st int
				st, body = e.do(c, "GET", path, "", nil)
				if st != http.StatusOK {
					t.Errorf("link %s: %d", m[0], st)
					continue
				}
				pages[path] = body
			}
			if fragment != "" && !strings.Contains(body, `id="`+fragment+`"`) {
				t.Errorf("link %s: %s has no id %q", m[0], path, fragment)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("only %d links between pages checked", checked)
	}
	if !strings.Contains(tasks, `<h2 id="`) {
		t.Error("the headings of /docs/tasks have no ids")
	}
}

// A reader whose language is Chinese gets the Chinese page, and the English
// one where there is no translation (the generated reference).
func TestDocsFollowTheReadersLanguage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	zh := map[string]string{"Accept-Language": "zh-CN"}

	status, body := e.do(c, "GET", "/docs/tasks", "", zh)
	if status != http.StatusOK || !strings.Contains(body, ">任务</h1>") || !strings.Contains(body, `lang="zh-CN"`) {
		t.Errorf("GET /docs/tasks in Chinese: %d, want the Chinese page: %.500s", status, body)
	}
	if !strings.Contains(body, ">帮助</a>") {
		t.Error("the Chinese page's header has no 帮助 link")
	}
	status, body = e.do(c, "GET", "/docs", "", zh)
	if status != http.StatusOK || !strings.Contains(body, ">ScheduleMaster for Go 使用手册</h1>") {
		t.Errorf("GET /docs in Chinese: %d, want the Chinese index: %.300s", status, body)
	}
	status, body = e.do(c, "GET", "/docs/reference/metrics", "", zh)
	if status != http.StatusOK || !strings.Contains(body, `<article class="manual" id="manual" lang="en">`) {
		t.Errorf("GET /docs/reference/metrics in Chinese: %d, want the English page marked lang=en: %.300s", status, body)
	}
}

// Names that are no page of the manual are the console's 404, whatever they
// try; a NUL is refused before any handler, as on every console path.
func TestDocsRefuseWhatIsNoPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	for _, path := range []string{"/docs/nonexistent", "/docs/../../etc/passwd", "/docs/..%2F..%2Fetc%2Fpasswd",
		"/docs/reference/../../go.mod", "/docs/zh-CN/tasks", "/docs/tasks.md", "/docs/embed.go", "/docs/reference/",
		"/docs/.hidden", "/docs/tasks/", "/docs/%2e%2e/%2e%2e/etc/passwd"} {
		status, body := e.do(c, "GET", path, "", nil)
		if status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404: %.200s", path, status, body)
		}
		if strings.Contains(body, "root:") || strings.Contains(body, "module github.com") {
			t.Errorf("GET %s shows a file outside the manual", path)
		}
	}
	if status, _ := e.do(c, "GET", "/docs/%00", "", nil); status != http.StatusBadRequest {
		t.Errorf("GET /docs/%%00: %d, want 400 (a NUL is no text)", status)
	}
}

// The manual is the console's: an anonymous reader is sent to the login
// like on any console page.
func TestDocsNeedASignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	for _, path := range []string{"/docs", "/docs/tasks"} {
		resp, err := e.client().Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
			t.Errorf("GET %s anonymously: %d to %q, want 303 to the login", path, resp.StatusCode, loc)
		}
	}
}

// Each console page's header links the manual's page on it.
func TestConsolePagesLinkTheirManualTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	for page, topic := range map[string]string{"/dashboard": "/docs", "/tasks": "/docs/tasks", "/nodes": "/docs/concepts",
		"/pools": "/docs/pools", "/delayed": "/docs/delayed-tasks", "/projects": "/docs/teams", "/users": "/docs/teams",
		"/tokens": "/docs/teams", "/settings": "/docs/configuration", "/runs": "/docs/tasks", "/events": "/docs/operations"} {
		status, body := e.do(c, "GET", page, "", nil)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", page, status)
			continue
		}
		if want := `class="help-link" href="` + topic + `" id="help-link"`; !strings.Contains(body, want) {
			t.Errorf("GET %s: its header has no Help link to %s", page, topic)
		}
	}
}
