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

// connectionsEnv is a master with an admin, an offline worker w1 (the
// executor of the tasks) and the admin's client.
func connectionsEnv(t *testing.T) (*env, *http.Client) {
	t.Helper()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	if st, body := e.do(admin, "POST", "/api/v1/nodes", `{"name":"w1","host":"127.0.0.1:1","protocol":"http"}`, nil); st != http.StatusCreated {
		t.Fatalf("node: %d %s", st, body)
	}
	return e, admin
}

// A connection defined through the console form: its secret never comes
// back in a page (not even in a refused form), the list and its page say
// it is set, masked; an edit that leaves the mask keeps the stored secret;
// a connection a task uses is not deleted, the page says why and names the
// task; the test button without a running worker says there is none.
func TestConnectionConsoleForms(t *testing.T) {
	t.Parallel()
	e, admin := connectionsEnv(t)
	const secret = "hunter2-connection-secret"
	noSecret := func(what, page string) {
		t.Helper()
		if strings.Contains(page, secret) {
			t.Fatalf("%s shows the secret", what)
		}
	}

	st, page := e.do(admin, "GET", "/connections/new?kind=redis", "", nil)
	for _, want := range []string{`<option value="redis" selected>`, `<option value="*">all projects</option>`, `type="password"`,
		`<a href="/connections" class="active">Connections</a>`} {
		if st != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("new connection form (%d) lacks %s", st, want)
		}
	}
	// A refused form names the field and asks for the secret again.
	resp := e.postForm(admin, "/connections", url.Values{"project": {"default"}, "name": {"bad name"}, "kind": {"nats"},
		"address": {"127.0.0.1:4222"}, "secret": {secret}})
	page = readAll(t, resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="error-name"`) || !strings.Contains(page, "Type the secret again") {
		t.Fatalf("refused connection form: %d\n%.3000s", resp.StatusCode, page)
	}
	noSecret("the refused form", page)

	resp = e.postForm(admin, "/connections", url.Values{"project": {"default"}, "name": {"bus"}, "kind": {"nats"},
		"address": {"127.0.0.1:4222"}, "user": {"svc"}, "secret": {secret}, "tls_enabled": {"1"}, "description": {"the order bus"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/connections/") {
		t.Fatalf("create connection: %d to %q\n%.3000s", resp.StatusCode, loc, readAll(t, resp))
	}
	id := strings.TrimPrefix(loc, "/connections/")
	stored, err := store.GetConnection(context.Background(), e.st.DB, id)
	if err != nil || stored.SecretEnc == "" || strings.Contains(stored.SecretEnc, secret) {
		t.Fatalf("stored connection: %+v %v", stored, err)
	}

	_, page = e.do(admin, "GET", loc, "", nil)
	noSecret("the connection's page", page)
	for _, want := range []string{"Connection bus defined.", `id="connection-secret"`, protocol.SecretMask, "the order bus", `id="connection-unused"`,
		`id="test-connection"`, `href="/connections/` + id + `/edit"`, `id="delete-connection"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the connection's page lacks %s", want)
		}
	}
	_, page = e.do(admin, "GET", "/connections", "", nil)
	noSecret("the list", page)
	for _, want := range []string{`data-connection="bus"`, `href="/connections/` + id + `"`, "127.0.0.1:4222", protocol.SecretMask, "set", "default"} {
		if !strings.Contains(page, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
	_, page = e.do(admin, "GET", loc+"/edit", "", nil)
	noSecret("the edit form", page)
	if !strings.Contains(page, `value="`+protocol.SecretMask+`"`) || !strings.Contains(page, "leave it to keep the stored secret") {
		t.Fatalf("the edit form does not show the mask:\n%.3000s", page)
	}

	// An edit leaving the mask keeps the secret; the address changes.
	resp = e.postForm(admin, loc, url.Values{"name": {"bus"}, "kind": {"nats"}, "address": {"127.0.0.1:4223"}, "user": {"svc"},
		"secret": {protocol.SecretMask}, "version": {"1"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != loc {
		t.Fatalf("edit: %d to %q\n%.3000s", resp.StatusCode, resp.Header.Get("Location"), readAll(t, resp))
	}
	after, err := store.GetConnection(context.Background(), e.st.DB, id)
	if err != nil || after.SecretEnc != stored.SecretEnc || after.Address != "127.0.0.1:4223" {
		t.Fatalf("after an edit with the mask: address %q, secret kept %v (%v)", after.Address, after.SecretEnc == stored.SecretEnc, err)
	}
	_, page = e.do(admin, "GET", loc, "", nil)
	noSecret("the page after the edit", page)
	if !strings.Contains(page, "127.0.0.1:4223") || !strings.Contains(page, protocol.SecretMask) {
		t.Error("the page after the edit lacks the new address or the mask")
	}

	// A task uses it: the delete is refused on its page, naming the task.
	st, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"publish-orders","type":"nats","schedule":{"kind":"cron","cron":"0 * * * *"},
		"nats":{"connection":"bus","subject":"orders.created"},"executors":["w1"]}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("nats task: %d %s", st, body)
	}
	taskID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	resp = e.postForm(admin, loc+"/delete", url.Values{})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != loc {
		t.Fatalf("delete of a used connection: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = e.do(admin, "GET", loc, "", nil)
	if !strings.Contains(page, "flash-error") || !strings.Contains(page, "is used by 1 task(s)") || !strings.Contains(page, `data-task="`+taskID+`"`) {
		t.Fatalf("the refused delete is not said on the page:\n%.4000s", page)
	}
	if _, err := store.GetConnection(context.Background(), e.st.DB, id); err != nil {
		t.Fatalf("the used connection was deleted: %v", err)
	}

	// The test button with no running worker: the refusal, in the page.
	st, page = e.do(admin, "POST", loc+"/test", "", map[string]string{"HX-Request": "true"})
	if st != http.StatusConflict || !strings.Contains(page, `id="conn-test-outcome" data-ok="false"`) ||
		!strings.Contains(page, "no running worker to test the connection on") || strings.Contains(page, "<html") {
		t.Fatalf("test without a worker: %d\n%s", st, page)
	}
	resp = e.postForm(admin, loc+"/test", url.Values{"node": {""}})
	if page = readAll(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(page, "no running worker to test the connection on") ||
		!strings.Contains(page, `id="connection-title"`) {
		t.Fatalf("test without htmx: %d\n%.3000s", resp.StatusCode, page)
	}

	// Once the task is gone, the delete goes through.
	if st, body := e.do(admin, "POST", "/api/v1/tasks/"+taskID+"/stop", "", nil); st >= 300 && st != http.StatusConflict {
		t.Fatalf("stop: %d %s", st, body)
	}
	if st, body := e.do(admin, "DELETE", "/api/v1/tasks/"+taskID, "", nil); st >= 300 {
		t.Fatalf("delete task: %d %s", st, body)
	}
	resp = e.postForm(admin, loc+"/delete", url.Values{})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/connections" {
		t.Fatalf("delete: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page = e.do(admin, "GET", "/connections", "", nil); !strings.Contains(page, "Connection bus deleted.") || strings.Contains(page, `data-connection="bus"`) {
		t.Error("the list after the delete")
	}
}

// The task form's type select: each type's fields come as a fragment, the
// connection select offering the project's connections of the kinds the
// type takes; the runners' fragment names the option when no worker runs
// the type; a nats task made through the form shows its values back on
// its edit form, its target and connection on its page; bad fields are
// said next to their inputs.
func TestTaskFormTypesBeyondHTTP(t *testing.T) {
	t.Parallel()
	e, admin := connectionsEnv(t)
	st, body := e.do(admin, "POST", "/api/v1/connections", `{"name":"bus","kind":"nats","address":"127.0.0.1:4222","secret":"s3cret-value"}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("connection: %d %s", st, body)
	}
	connID := decode[struct {
		ID string `json:"id"`
	}](t, body).ID
	hx := map[string]string{"HX-Request": "true"}

	_, page := e.do(admin, "GET", "/tasks/new", "", nil)
	for _, typ := range protocol.TaskTypes() {
		if !strings.Contains(page, `<option value="`+typ+`"`) {
			t.Errorf("the type select lacks %s", typ)
		}
	}
	if !strings.Contains(page, `hx-get="/tasks/type-fields"`) || !strings.Contains(page, `id="type-runners"`) || !strings.Contains(page, `<div id="type-fields"></div>`) {
		t.Error("the type select does not fetch the type's fields and runners")
	}

	st, frag := e.do(admin, "GET", "/tasks/type-fields?type=nats", "", hx)
	for _, want := range []string{`<div id="type-fields">`, `id="nats-fields"`, `name="nats_subject"`, `name="nats_headers"`,
		`<option value="bus">`, `href="/connections/new?kind=nats"`} {
		if st != http.StatusOK || !strings.Contains(frag, want) {
			t.Errorf("nats fields (%d) lack %s", st, want)
		}
	}
	if strings.Contains(frag, "<html") {
		t.Error("the fields fragment is a whole page")
	}
	if _, frag = e.do(admin, "GET", "/tasks/type-fields?type=sql", "", hx); !strings.Contains(frag, `id="sql-statement"`) || strings.Contains(frag, `value="bus"`) {
		t.Errorf("sql fields offer a nats connection or lack the statement:\n%s", frag)
	}
	if _, frag = e.do(admin, "GET", "/tasks/type-fields?type=http", "", hx); strings.TrimSpace(frag) != `<div id="type-fields"></div>` {
		t.Errorf("http fields fragment: %q", frag)
	}
	st, frag = e.do(admin, "GET", "/tasks/type-runners?type=nats", "", hx)
	if st != http.StatusOK || !strings.Contains(frag, "No running worker runs nats tasks") || !strings.Contains(frag, "<code>--allow-types nats</code>") {
		t.Errorf("runners of nats: %d %s", st, frag)
	}
	if _, frag = e.do(admin, "GET", "/tasks/type-runners?type=shell", "", hx); !strings.Contains(frag, "<code>--allow-shell</code>") {
		t.Errorf("runners of shell: %s", frag)
	}
	if _, frag = e.do(admin, "GET", "/tasks/type-runners?type=http", "", hx); strings.TrimSpace(frag) != "" {
		t.Errorf("runners of http: %q", frag)
	}

	form := func(kv ...string) url.Values {
		v := url.Values{"title": {"publish-orders"}, "type": {"nats"}, "schedule_kind": {"cron"}, "schedule_cron": {"0 * * * *"},
			"timeout": {"30s"}, "retries": {"0"}, "executors": {"w1"}, "nats_connection": {"bus"}, "nats_mode": {"jetstream"},
			"nats_subject": {"orders.created"}, "nats_payload": {`{"id":1}`}, "nats_headers": {"X-Id: 1\nX-Src: sm"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	// Bad fields: each said next to its input, the typed values kept.
	resp := e.postForm(admin, "/tasks", form("nats_subject", "bad subject", "nats_headers", "no colon here"))
	page = readAll(t, resp)
	for _, want := range []string{`id="error-nats-subject"`, `id="error-nats-headers"`, `value="bad subject"`, "no colon here",
		`href="#nats-subject"`, `<option value="bus" selected>`} {
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, want) {
			t.Errorf("refused nats form (%d) lacks %s", resp.StatusCode, want)
		}
	}
	resp = e.postForm(admin, "/tasks", form("nats_connection", "nope"))
	if page = readAll(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `id="error-nats-connection"`) ||
		!strings.Contains(page, "no connection named") {
		t.Errorf("a task naming an unknown connection: %d", resp.StatusCode)
	}

	resp = e.postForm(admin, "/tasks", form())
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/tasks/") {
		t.Fatalf("create nats task: %d\n%.4000s", resp.StatusCode, readAll(t, resp))
	}
	_, page = e.do(admin, "GET", loc, "", nil)
	for _, want := range []string{`id="task-target">orders.created<`, `href="/connections/` + connID + `">bus</a>`, "jetstream", "X-Id: 1; X-Src: sm"} {
		if !strings.Contains(page, want) {
			t.Errorf("the nats task's page lacks %s", want)
		}
	}
	_, page = e.do(admin, "GET", loc+"/edit", "", nil)
	for _, want := range []string{`<option value="nats" selected>`, `id="nats-fields"`, `<option value="bus" selected>`,
		`<option value="jetstream" selected>`, `value="orders.created"`, "X-Id: 1\nX-Src: sm", "{&#34;id&#34;:1}"} {
		if !strings.Contains(page, want) {
			t.Errorf("the nats task's edit form lacks %q", want)
		}
	}
	// Back at the task's own type, the fragment holds its values.
	id := strings.TrimPrefix(loc, "/tasks/")
	if _, frag = e.do(admin, "GET", "/tasks/type-fields?type=nats&id="+id, "", hx); !strings.Contains(frag, `value="orders.created"`) {
		t.Errorf("the edited task's fields do not come back:\n%s", frag)
	}
	// Saving the edit form as shown changes nothing of its definition.
	v := form()
	v.Set("version", "1")
	resp = e.postForm(admin, loc, v)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save the edit form: %d\n%.3000s", resp.StatusCode, readAll(t, resp))
	}
	tk, err := e.m.Tasks().Get(context.Background(), id)
	if err != nil || tk.NATS == nil || tk.NATS.Mode != "jetstream" || tk.NATS.Headers["X-Src"] != "sm" || tk.NATS.Payload != `{"id":1}` {
		t.Fatalf("stored nats task: %+v %v", tk.NATS, err)
	}
}
