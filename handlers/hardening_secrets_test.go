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

// TestSecretsAreMasked: sensitive headers, secret params and URL passwords
// are stored (and so pushed to workers) but every page and API answer shows
// the mask; an edit that sends the mask back, by API or console form, keeps
// the stored value, and a new value replaces it.
func TestSecretsAreMasked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	if st, body := e.do(admin, "POST", "/api/v1/nodes", `{"name":"w1","host":"127.0.0.1:1","protocol":"http","priority":1,"max_concurrency":2}`, nil); st >= 300 {
		t.Fatalf("create node: %d %s", st, body)
	}
	secrets := []string{"Bearer x-secret-1", "custom-secret-2", "url-secret-3", "param-secret-4"}
	st, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"hook","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},
		"http":{"method":"GET","url":"http://bob:url-secret-3@127.0.0.1:1/hook",
			"headers":{"Authorization":"Bearer x-secret-1","X-Custom":"custom-secret-2","X-Plain":"plain-value"},"secret_headers":["X-Custom"]},
		"params":{"TOKEN":"param-secret-4","MODE":"fast"},"secret_params":["TOKEN"],"executors":["w1"]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("create task: %d %s", st, body)
	}
	id := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	stored := func() string {
		t.Helper()
		row, err := store.GetTask(context.Background(), e.st.DB, id)
		if err != nil {
			t.Fatal(err)
		}
		return row.Spec
	}
	noSecrets := func(what, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Fatalf("%s shows the secret %q", what, s)
			}
		}
	}
	noSecrets("create answer", body)
	for _, want := range []string{protocol.SecretMask, "plain-value", "fast", "http://bob:" + protocol.SecretMask + "@127.0.0.1:1/hook"} {
		if !strings.Contains(body, want) {
			t.Fatalf("create answer lacks %q: %s", want, body)
		}
	}
	for _, s := range secrets {
		if !strings.Contains(stored(), s) {
			t.Fatalf("the stored definition lost %q", s)
		}
	}

	_, got := e.do(admin, "GET", "/api/v1/tasks/"+id, "", nil)
	noSecrets("API GET", got)
	_, list := e.do(viewer, "GET", "/api/v1/tasks", "", nil)
	noSecrets("API list", list)
	for _, c := range []*http.Client{admin, viewer} {
		_, page := e.do(c, "GET", "/tasks/"+id, "", nil)
		noSecrets("task page", page)
		if !strings.Contains(page, protocol.SecretMask) {
			t.Fatal("the task page does not show the mask")
		}
	}
	_, form := e.do(admin, "GET", "/tasks/"+id+"/edit", "", nil)
	noSecrets("edit form", form)
	if !strings.Contains(form, protocol.SecretMask) || !strings.Contains(form, `name="secret_params" value="TOKEN"`) {
		t.Fatalf("edit form lacks the mask or the secret params field")
	}

	// The masked answer sent back unchanged (but a new title) keeps every secret.
	put := strings.Replace(got, `"title":"hook"`, `"title":"hook 2"`, 1)
	put = strings.NewReplacer(`"status":0,`, ``).Replace(put)
	if st, body := e.do(admin, "PUT", "/api/v1/tasks/"+id, put, nil); st != http.StatusOK {
		t.Fatalf("PUT the masked task: %d %s", st, body)
	}
	spec := stored()
	for _, s := range append(secrets, `"title":"hook 2"`) {
		if !strings.Contains(spec, s) {
			t.Fatalf("after PUT with masks the stored definition lacks %q: %s", s, spec)
		}
	}
	if strings.Contains(spec, protocol.SecretMask) {
		t.Fatalf("the mask was stored: %s", spec)
	}

	// The console form, saved as shown, keeps them too.
	resp := e.postForm(admin, "/tasks/"+id, url.Values{
		"title": {"hook 3"}, "type": {"http"}, "schedule_kind": {"cron"}, "schedule_cron": {"0 * * * *"},
		"timeout": {"30s"}, "retries": {"0"}, "executors": {"w1"},
		"http_method": {"GET"}, "http_url": {"http://bob:" + protocol.SecretMask + "@127.0.0.1:1/hook"},
		"http_headers":        {"Authorization: " + protocol.SecretMask + "\nX-Custom: " + protocol.SecretMask + "\nX-Plain: plain-value"},
		"http_secret_headers": {"X-Custom"},
		"params":              {"MODE=fast\nTOKEN=" + protocol.SecretMask}, "secret_params": {"TOKEN"},
	})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console save with masks: %d", resp.StatusCode)
	}
	spec = stored()
	for _, s := range append(secrets, `"title":"hook 3"`) {
		if !strings.Contains(spec, s) {
			t.Fatalf("after the console save the stored definition lacks %q: %s", s, spec)
		}
	}

	// A new value replaces the secret.
	put = strings.Replace(put, `"Authorization":"`+protocol.SecretMask+`"`, `"Authorization":"Bearer new-5"`, 1)
	// The body read at version 1 is refused after two saves; without its
	// version it saves over them.
	if st, body := e.do(admin, "PUT", "/api/v1/tasks/"+id, put, nil); st != http.StatusConflict {
		t.Fatalf("PUT from an old version: %d %s", st, body)
	}
	put = strings.Replace(put, `"version":1,`, ``, 1)
	if st, body := e.do(admin, "PUT", "/api/v1/tasks/"+id, put, nil); st != http.StatusOK {
		t.Fatalf("PUT a new secret: %d %s", st, body)
	}
	if spec := stored(); !strings.Contains(spec, "Bearer new-5") || strings.Contains(spec, "x-secret-1") {
		t.Fatalf("new secret not stored: %s", spec)
	}
}

// TestViewersSeeNoEmails: the users API and page show e-mails to admins and
// to the user themself only.
func TestViewersSeeNoEmails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	if st, body := e.do(admin, "PATCH", "/api/v1/users/admin", `{"email":"root@example.com"}`, nil); st != http.StatusOK {
		t.Fatalf("set admin email: %d %s", st, body)
	}
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	if st, body := e.do(viewer, "GET", "/api/v1/users", "", nil); st != http.StatusOK || strings.Contains(body, "root@example.com") {
		t.Fatalf("viewer GET /api/v1/users: %d %s", st, body)
	}
	if st, body := e.do(viewer, "GET", "/api/v1/users/admin", "", nil); st != http.StatusOK || strings.Contains(body, `"email"`) {
		t.Fatalf("viewer GET /api/v1/users/admin: %d %s", st, body)
	}
	if _, body := e.do(viewer, "GET", "/users", "", nil); strings.Contains(body, "root@example.com") {
		t.Fatal("viewer's users page shows an e-mail")
	}
	if st, body := e.do(admin, "GET", "/api/v1/users", "", nil); st != http.StatusOK || !strings.Contains(body, "root@example.com") {
		t.Fatalf("admin GET /api/v1/users lacks the e-mail: %d %s", st, body)
	}
}
