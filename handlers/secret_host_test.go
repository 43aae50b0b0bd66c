package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestMaskedSecretsAreNotSentToANewHost: an edit (API PUT, console form) or
// a clone form that moves the task's URL to another scheme, host or port
// while leaving secrets masked is refused with a sentence naming them; with
// the secrets typed again, or on the same host, it is saved.
func TestMaskedSecretsAreNotSentToANewHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	if st, body := e.do(admin, "POST", "/api/v1/nodes", `{"name":"w1","host":"127.0.0.1:1","protocol":"http","priority":1,"max_concurrency":2}`, nil); st >= 300 {
		t.Fatalf("create node: %d %s", st, body)
	}
	st, created := e.do(admin, "POST", "/api/v1/tasks", `{"title":"hook","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},
		"http":{"method":"GET","url":"http://bob:url-secret-3@127.0.0.1:8001/hook",
			"headers":{"Authorization":"Bearer x-secret-1","X-Custom":"custom-secret-2","X-Plain":"plain"},"secret_headers":["X-Custom"]},
		"params":{"TOKEN":"param-secret-4"},"secret_params":["TOKEN"],"executors":["w1"]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("create task: %d %s", st, created)
	}
	id := decode[struct {
		ID string `json:"id"`
	}](t, created).ID
	spec := func() string {
		t.Helper()
		row, err := store.GetTask(context.Background(), e.st.DB, id)
		if err != nil {
			t.Fatal(err)
		}
		return row.Spec
	}
	_, masked := e.do(admin, "GET", "/api/v1/tasks/"+id, "", nil)
	masked = strings.Replace(masked, `"status":0,`, "", 1)
	before := spec()

	// Another port, secrets left masked: refused, nothing stored.
	moved := strings.Replace(masked, "127.0.0.1:8001", "127.0.0.1:8002", 1)
	st, refusal := e.do(admin, "PUT", "/api/v1/tasks/"+id, moved, nil)
	if st != http.StatusBadRequest && st != http.StatusUnprocessableEntity {
		t.Fatalf("PUT to another port with masked secrets: %d %s", st, refusal)
	}
	for _, want := range []string{`header \"Authorization\"`, `header \"X-Custom\"`, `param \"TOKEN\"`, "the URL's password", "another scheme, host or port"} {
		if !strings.Contains(refusal, want) {
			t.Fatalf("refusal %s does not name %s", refusal, want)
		}
	}
	if spec() != before {
		t.Fatal("a refused edit changed the task")
	}
	// Another scheme is another origin too.
	https := strings.Replace(masked, "http://bob", "https://bob", 1)
	if st, body := e.do(admin, "PUT", "/api/v1/tasks/"+id, https, nil); st != http.StatusBadRequest && st != http.StatusUnprocessableEntity {
		t.Fatalf("PUT to https with masked secrets: %d %s", st, body)
	}

	// The same host, another path: the masks keep the secrets.
	samePath := strings.Replace(masked, "/hook", "/other", 1)
	if st, body := e.do(admin, "PUT", "/api/v1/tasks/"+id, samePath, nil); st != http.StatusOK {
		t.Fatalf("PUT on the same host: %d %s", st, body)
	}
	if s := spec(); !strings.Contains(s, "custom-secret-2") || !strings.Contains(s, "/other") {
		t.Fatalf("same-host edit lost a secret: %s", s)
	}

	// The console form moving the host with masks: 422, fields named.
	form := url.Values{
		"title": {"hook"}, "type": {"http"}, "schedule_kind": {"cron"}, "schedule_cron": {"0 * * * *"},
		"timeout": {"30s"}, "retries": {"0"}, "executors": {"w1"},
		"http_method": {"GET"}, "http_url": {"http://bob:" + protocol.SecretMask + "@127.0.0.2:8001/hook"},
		"http_headers":        {"Authorization: " + protocol.SecretMask + "\nX-Custom: " + protocol.SecretMask},
		"http_secret_headers": {"X-Custom"},
		"params":              {"TOKEN=" + protocol.SecretMask}, "secret_params": {"TOKEN"},
	}
	resp := e.postForm(admin, "/tasks/"+id, form)
	page := body(t, resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "re-enter") || !strings.Contains(page, "X-Custom") {
		t.Fatalf("console edit to another host: %d", resp.StatusCode)
	}

	// The clone form moving the host with masks: refused as well.
	form.Set("clone_of", id)
	form.Set("title", "copy")
	if resp := e.postForm(admin, "/tasks", form); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("clone to another host with masked secrets: %d", resp.StatusCode)
	}

	// Every secret typed again: saved, the new values stored.
	form.Del("clone_of")
	form.Set("title", "hook")
	form.Set("http_url", "http://bob:new-pw-7@127.0.0.2:8001/hook")
	form.Set("http_headers", "Authorization: Bearer new-8\nX-Custom: new-9")
	form.Set("params", "TOKEN=new-10")
	if resp := e.postForm(admin, "/tasks/"+id, form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console edit with re-entered secrets: %d", resp.StatusCode)
	}
	s := spec()
	for _, want := range []string{"new-pw-7", "Bearer new-8", "new-9", "new-10", "127.0.0.2:8001"} {
		if !strings.Contains(s, want) {
			t.Fatalf("stored definition lacks %q: %s", want, s)
		}
	}
	for _, old := range []string{"url-secret-3", "x-secret-1", "custom-secret-2", "param-secret-4"} {
		if strings.Contains(s, old) {
			t.Fatalf("an old secret %q went with the new host: %s", old, s)
		}
	}
}
