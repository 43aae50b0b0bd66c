package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestTaskVersionHistoryInTheConsole: an edit with a note is version 2; the
// task page links its history, which lists both versions with who, from
// where and the note; a version's page shows what changed; an edit that
// started from version 1 is refused (409) keeping what was typed, with a
// link to what changed and the form ready to save over it; Restore makes
// version 1 the definition again as version 3; a viewer reads the history
// and is offered no Restore.
func TestTaskVersionHistoryInTheConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	startRunningWorker(t, e, "w1")
	c := e.login("admin", "admin-password-1")
	resp := e.postForm(c, "/tasks", taskForm("ping target", "http://127.0.0.1:1/a", "w1"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", resp.StatusCode, body(t, resp))
	}
	id := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	form := taskForm("ping target", "http://127.0.0.1:1/a", "w1")

	resp = e.postForm(c, "/tasks/"+id, with(form, "title", "ping target b", "version", "1", "note", "rename for the b team"))
	if b := body(t, resp); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", resp.StatusCode, b)
	}
	_, page := e.do(c, "GET", "/tasks/"+id, "", nil)
	if !strings.Contains(page, `id="task-history"`) || !strings.Contains(page, `href="/tasks/`+id+`/versions"`) {
		t.Fatal("the task page does not link its history")
	}
	status, page := e.do(c, "GET", "/tasks/"+id+"/versions", "", nil)
	if status != 200 || !strings.Contains(page, `id="version-2"`) || !strings.Contains(page, `id="version-1"`) ||
		!strings.Contains(page, "rename for the b team") || !strings.Contains(page, `data-testid="current"`) ||
		strings.Count(page, `data-action="restore"`) != 1 {
		t.Fatalf("history: %d\n%s", status, page)
	}
	status, page = e.do(c, "GET", "/tasks/"+id+"/versions/2?with=1", "", nil)
	if status != 200 || !strings.Contains(page, `id="diff-table"`) || !strings.Contains(page, `data-field="title"`) ||
		!strings.Contains(page, "ping target b") {
		t.Fatalf("version 2 against 1: %d\n%s", status, page)
	}
	if status, _ := e.do(c, "GET", "/tasks/"+id+"/versions/9", "", nil); status != http.StatusNotFound {
		t.Fatalf("a version that does not exist: %d", status)
	}
	// The page of the versions before 2.
	status, page = e.do(c, "GET", "/tasks/"+id+"/versions?before=2", "", nil)
	if status != 200 || strings.Contains(page, `id="version-2"`) || !strings.Contains(page, `id="version-1"`) {
		t.Fatalf("versions before 2: %d\n%s", status, page)
	}
	if status, _ := e.do(c, "GET", "/tasks/"+id+"/versions?before=x", "", nil); status != http.StatusBadRequest {
		t.Fatalf("versions before x: %d", status)
	}
	// A run says the version it ran and links it.
	at := time.Now().UTC().Add(-time.Minute)
	if _, err := store.InsertRuns(storetest.Ctx(t), e.st.DB, []store.Run{{ID: "ran-v2", TaskID: id, Node: "w1", ScheduledAt: at,
		StartedAt: at, EndedAt: at, Result: store.ResultSuccess, Attempt: 1, TaskVersion: 2}}); err != nil {
		t.Fatal(err)
	}
	status, page = e.do(c, "GET", "/runs/ran-v2", "", nil)
	if status != 200 || !strings.Contains(page, `id="run-version"`) || !strings.Contains(page, `href="/tasks/`+id+`/versions/2"`) {
		t.Fatalf("the run page does not link the version it ran: %d\n%s", status, page)
	}

	// An edit that started from version 1: refused, what was typed kept.
	resp = e.postForm(c, "/tasks/"+id, with(form, "title", "ping target c", "version", "1"))
	b := body(t, resp)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, `id="form-conflict"`) || !strings.Contains(b, `id="task-form"`) ||
		!strings.Contains(b, `value="ping target c"`) || !strings.Contains(b, `name="version" value="2"`) ||
		!strings.Contains(b, `href="/tasks/`+id+`/versions/2?with=1"`) {
		t.Fatalf("a stale edit: %d\n%s", resp.StatusCode, b)
	}
	if got := e.task(id); got.Title != "ping target b" || got.Version != 2 {
		t.Fatalf("a stale edit changed the task: %q v%d", got.Title, got.Version)
	}

	// Restore version 1.
	resp = e.postForm(c, "/tasks/"+id+"/versions/1/restore", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks/"+id {
		t.Fatalf("restore: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := e.task(id); got.Title != "ping target" || got.Version != 3 {
		t.Fatalf("after restore: %q v%d", got.Title, got.Version)
	}

	// A viewer reads the history; no Restore for them.
	e.addUser("vera", "vera-password-1", store.RoleViewer)
	v := e.login("vera", "vera-password-1")
	status, page = e.do(v, "GET", "/tasks/"+id+"/versions", "", nil)
	if status != 200 || !strings.Contains(page, `id="version-3"`) || strings.Contains(page, `data-action="restore"`) {
		t.Fatalf("history for a viewer: %d", status)
	}
	if resp := e.postForm(v, "/tasks/"+id+"/versions/1/restore", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's restore: %d", resp.StatusCode)
	}
}
