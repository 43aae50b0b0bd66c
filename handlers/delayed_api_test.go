package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// delayedSnapshot renders every delayed task row, to prove a refusal changed nothing.
func delayedSnapshot(t *testing.T, e *env) string {
	t.Helper()
	var rows []store.DelayedTask
	if err := e.st.DB.NewSelect().Model(&rows).OrderExpr("id").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%+v", rows)
}

type delayedJSON struct {
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	SourceApp  string            `json:"source_app"`
	Topic      string            `json:"topic"`
	ContentKey string            `json:"content_key"`
	DueAt      time.Time         `json:"due_at"`
	NotifyURL  string            `json:"notify_url"`
	Retries    int               `json:"retries"`
	Attempts   int               `json:"attempts"`
	Executors  []string          `json:"executors"`
	Late       bool              `json:"late"`
	FinishedAt *time.Time        `json:"finished_at"`
	Runs       []json.RawMessage `json:"runs"`
}

func decodeDelayed(t *testing.T, body string) delayedJSON {
	t.Helper()
	var d delayedJSON
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return d
}

// Hostile or wrong input to POST /api/v1/delayed is a 400 naming the field,
// and the database is unchanged.
func TestDelayedAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		ctx := context.Background()
		if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Mode: store.ModeManual}); err != nil {
			t.Fatal(err)
		}
		c := e.login("admin", "admin-password-1")
		base := map[string]any{"source_app": "shop", "topic": "order.timeout", "content_key": "42", "delay": "30m",
			"notify_url": "http://127.0.0.1:9/cb", "notify_body": `{"order":42}`, "content_type": "application/json"}
		body := func(edit func(map[string]any)) string {
			m := map[string]any{}
			for k, v := range base {
				m[k] = v
			}
			edit(m)
			b, _ := json.Marshal(m)
			return string(b)
		}
		before := delayedSnapshot(t, e)
		cases := []struct {
			name, field, body string
		}{
			{"bad duration", "delay", body(func(m map[string]any) { m["delay"] = "soon" })},
			{"zero delay", "delay", body(func(m map[string]any) { m["delay"] = 0 })},
			{"negative delay", "delay", body(func(m map[string]any) { m["delay"] = "-5s" })},
			{"delay past a year", "delay", body(func(m map[string]any) { m["delay"] = "9000h" })},
			{"delay of another type", "delay", body(func(m map[string]any) { m["delay"] = []int{1} })},
			{"both delay and at", "at", body(func(m map[string]any) { m["at"] = time.Now().Add(time.Hour).Format(time.RFC3339) })},
			{"neither delay nor at", "delay", body(func(m map[string]any) { delete(m, "delay") })},
			{"at not RFC 3339", "at", body(func(m map[string]any) { delete(m, "delay"); m["at"] = "tomorrow noon" })},
			{"at in the past", "at", body(func(m map[string]any) { delete(m, "delay"); m["at"] = "2001-01-01T00:00:00Z" })},
			{"relative URL", "notify_url", body(func(m map[string]any) { m["notify_url"] = "/cb" })},
			{"ftp URL", "notify_url", body(func(m map[string]any) { m["notify_url"] = "ftp://example.com/x" })},
			{"URL with a space", "notify_url", body(func(m map[string]any) { m["notify_url"] = "http://a b/" })},
			{"no URL", "notify_url", body(func(m map[string]any) { delete(m, "notify_url") })},
			{"bad JSON body", "notify_body", body(func(m map[string]any) { m["notify_body"] = `{"order":` })},
			{"bad form body", "notify_body", body(func(m map[string]any) {
				m["content_type"] = "application/x-www-form-urlencoded"
				m["notify_body"] = "a=%zz"
			})},
			{"body too large", "notify_body", body(func(m map[string]any) { m["notify_body"] = `"` + strings.Repeat("x", 70<<10) + `"` })},
			{"other content type", "content_type", body(func(m map[string]any) { m["content_type"] = "text/plain" })},
			{"unknown executor", "executors", body(func(m map[string]any) { m["executors"] = []string{"w1", "ghost"} })},
			{"master as executor", "executors", body(func(m map[string]any) { m["executors"] = []string{"master"} })},
			{"unknown keeper", "keepers", body(func(m map[string]any) { m["keepers"] = []string{"nobody"} })},
			{"retries too many", "retries", body(func(m map[string]any) { m["retries"] = 11 })},
			{"retries negative", "retries", body(func(m map[string]any) { m["retries"] = -1 })},
			{"empty source app", "source_app", body(func(m map[string]any) { m["source_app"] = "  " })},
			{"long topic", "topic", body(func(m map[string]any) { m["topic"] = strings.Repeat("t", 129) })},
			{"content key with a line break", "content_key", body(func(m map[string]any) { m["content_key"] = "a\nb" })},
			{"unknown field", "bogus", body(func(m map[string]any) { m["bogus"] = 1 })},
			{"retries as text", "retries", body(func(m map[string]any) { m["retries"] = "3" })},
		}
		// The master's own node exists as the master does.
		if err := store.UpsertRegisteredNode(ctx, e.st.DB, &store.Node{Name: "master", Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", BootID: "b"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			status, resp := e.do(c, http.MethodPost, "/api/v1/delayed", tc.body, nil)
			if status != http.StatusBadRequest || !strings.Contains(resp, tc.field) {
				t.Errorf("%s: %d %s; want 400 naming %s", tc.name, status, resp, tc.field)
				continue
			}
			var er struct {
				Error  string            `json:"error"`
				Fields map[string]string `json:"fields"`
			}
			_ = json.Unmarshal([]byte(resp), &er)
			if er.Error == "" {
				t.Errorf("%s: no error sentence in %s", tc.name, resp)
			}
		}
		// Not JSON at all, NUL in a string, an empty body.
		for name, b := range map[string]string{"not JSON": "{source_app", "NUL": `{"source_app":"a\u0000b"}`, "empty": " "} {
			if status, resp := e.do(c, http.MethodPost, "/api/v1/delayed", b, nil); status != http.StatusBadRequest {
				t.Errorf("%s: %d %s", name, status, resp)
			}
		}
		if after := delayedSnapshot(t, e); after != before {
			t.Fatalf("refused creations changed the database:\n%s\n%s", before, after)
		}
		// A viewer may read but not create or cancel.
		e.addUser("viewer", "viewer-password-1", store.RoleViewer)
		v := e.login("viewer", "viewer-password-1")
		if status, _ := e.do(v, http.MethodPost, "/api/v1/delayed", body(func(map[string]any) {}), nil); status != http.StatusForbidden {
			t.Fatalf("viewer create: %d", status)
		}
		if status, _ := e.do(v, http.MethodGet, "/api/v1/delayed", "", nil); status != http.StatusOK {
			t.Fatalf("viewer list: %d", status)
		}
		// Bad filters.
		for _, q := range []string{"status=done", "limit=0", "offset=-1", "topic=" + strings.Repeat("x", 200)} {
			if status, resp := e.do(c, http.MethodGet, "/api/v1/delayed?"+q, "", nil); status != http.StatusBadRequest {
				t.Errorf("filter %s: %d %s", q, status, resp)
			}
		}
		if after := delayedSnapshot(t, e); after != before {
			t.Fatal("refused requests changed the database")
		}
	})
}

// Create (201), create again (200, the same), get with runs, list with
// filters, cancel (POST and DELETE: 409 the second time), all over the API;
// the run of a delayed task shows its delayed_id.
func TestDelayedAPILifecycle(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		c := e.login("admin", "admin-password-1")
		create := `{"source_app":"shop","topic":"order.timeout","content_key":"42","delay":"30m","notify_url":"http://127.0.0.1:9/cb","notify_body":"{\"order\":42}","retries":2}`
		status, resp := e.do(c, http.MethodPost, "/api/v1/delayed", create, nil)
		if status != http.StatusCreated {
			t.Fatalf("create: %d %s", status, resp)
		}
		d := decodeDelayed(t, resp)
		if d.Status != "pending" || len(d.ID) != 32 || d.Retries != 2 || d.Runs == nil || len(d.Runs) != 0 ||
			time.Until(d.DueAt) < 29*time.Minute || d.Executors == nil {
			t.Fatalf("created %s", resp)
		}
		for _, k := range []string{`"project":"default"`, `"content_type":"application/json"`, `"late":false`, `"finished_at":null`, `"notify_body":"{\"order\":42}"`} {
			if !strings.Contains(resp, k) {
				t.Errorf("answer lacks %s: %s", k, resp)
			}
		}
		status, resp = e.do(c, http.MethodPost, "/api/v1/delayed", strings.Replace(create, "30m", "5m", 1), nil)
		if again := decodeDelayed(t, resp); status != http.StatusOK || again.ID != d.ID || !again.DueAt.Equal(d.DueAt) {
			t.Fatalf("create again: %d %s; want 200 with the pending one, unchanged", status, resp)
		}
		other := strings.Replace(create, `"42"`, `"43"`, 1)
		other = strings.Replace(other, `"delay":"30m"`, `"at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"`, 1)
		if status, resp = e.do(c, http.MethodPost, "/api/v1/delayed", other, nil); status != http.StatusCreated {
			t.Fatalf("create with at: %d %s", status, resp)
		}
		d2 := decodeDelayed(t, resp)

		status, resp = e.do(c, http.MethodGet, "/api/v1/delayed/"+d.ID, "", nil)
		if got := decodeDelayed(t, resp); status != http.StatusOK || got.ID != d.ID || got.Runs == nil {
			t.Fatalf("get: %d %s", status, resp)
		}
		if status, resp := e.do(c, http.MethodGet, "/api/v1/delayed/nope", "", nil); status != http.StatusNotFound || !strings.Contains(resp, "does not exist") {
			t.Fatalf("get missing: %d %s", status, resp)
		}

		// A run of the task, as a worker reports it, shows in its runs.
		now := time.Now().UTC()
		run := store.Run{ID: "run-1", TaskID: d.ID, DelayedID: d.ID, Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now,
			Result: "failed", Attempt: 1, HTTPStatus: 503, Output: "busy"}
		if _, err := store.InsertDelayedRuns(context.Background(), e.st.DB, []store.Run{run}); err != nil {
			t.Fatal(err)
		}
		status, resp = e.do(c, http.MethodGet, "/api/v1/delayed/"+d.ID, "", nil)
		if got := decodeDelayed(t, resp); status != 200 || len(got.Runs) != 1 || !strings.Contains(string(got.Runs[0]), `"delayed_id":"`+d.ID+`"`) {
			t.Fatalf("get with a run: %s", resp)
		}
		if status, resp := e.do(c, http.MethodGet, "/api/v1/runs/run-1", "", nil); status != 200 || !strings.Contains(resp, `"delayed_id":"`+d.ID+`"`) {
			t.Fatalf("the run: %d %s", status, resp)
		}
		if status, page := e.do(c, http.MethodGet, "/runs/run-1", "", nil); status != 200 || !strings.Contains(page, `href="/delayed/`+d.ID+`"`) {
			t.Fatalf("the run's page does not link its delayed task: %d", status)
		}

		list := func(q string) (int, []delayedJSON) {
			t.Helper()
			status, resp := e.do(c, http.MethodGet, "/api/v1/delayed?"+q, "", nil)
			if status != http.StatusOK {
				t.Fatalf("list %s: %d %s", q, status, resp)
			}
			var page struct {
				Items []delayedJSON `json:"items"`
				Total int           `json:"total"`
			}
			if err := json.Unmarshal([]byte(resp), &page); err != nil {
				t.Fatal(err)
			}
			return page.Total, page.Items
		}
		if total, items := list(""); total != 2 || len(items) != 2 || items[0].ID != d2.ID {
			t.Fatalf("list all: %d %+v (newest first)", total, items)
		}
		if total, _ := list("status=pending&topic=order.timeout&source_app=shop"); total != 2 {
			t.Fatalf("list filtered: %d", total)
		}
		if total, _ := list("source_app=billing"); total != 0 {
			t.Fatalf("list other app: %d", total)
		}
		if total, items := list("limit=1&offset=1"); total != 2 || len(items) != 1 || items[0].ID != d.ID {
			t.Fatalf("list page 2: %d %+v", total, items)
		}

		status, resp = e.do(c, http.MethodPost, "/api/v1/delayed/"+d.ID+"/cancel", "", nil)
		if got := decodeDelayed(t, resp); status != http.StatusOK || got.Status != "cancelled" || got.FinishedAt == nil {
			t.Fatalf("cancel: %d %s", status, resp)
		}
		status, resp = e.do(c, http.MethodDelete, "/api/v1/delayed/"+d.ID, "", nil)
		if status != http.StatusConflict || !strings.Contains(resp, "cancelled already") {
			t.Fatalf("cancel twice: %d %s", status, resp)
		}
		if status, resp = e.do(c, http.MethodDelete, "/api/v1/delayed/"+d2.ID, "", nil); status != http.StatusOK {
			t.Fatalf("DELETE: %d %s", status, resp)
		}
		if total, _ := list("status=cancelled"); total != 2 {
			t.Fatalf("cancelled: %d", total)
		}
		// Cancelled, the key is free: a new task.
		status, resp = e.do(c, http.MethodPost, "/api/v1/delayed", create, nil)
		if fresh := decodeDelayed(t, resp); status != http.StatusCreated || fresh.ID == d.ID {
			t.Fatalf("create after cancel: %d %s", status, resp)
		}
	})
}

// The console: list with filters (and its live fragment), the form refusing
// bad input inline and keeping what was typed, creation, the detail page,
// cancel from the page.
func TestDelayedConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	get := func(path string, hx bool) (int, string) {
		t.Helper()
		h := map[string]string{}
		if hx {
			h["HX-Request"] = "true"
		}
		return e.do(c, http.MethodGet, path, "", h)
	}
	if status, page := get("/delayed", false); status != 200 || !strings.Contains(page, "No delayed tasks yet") || !strings.Contains(page, `href="/delayed"`) {
		t.Fatalf("empty list: %d", status)
	}
	form := url.Values{"source_app": {"shop"}, "topic": {"order.timeout"}, "content_key": {"42"}, "delay": {"later"},
		"notify_url": {"http://127.0.0.1:9/cb"}, "content_type": {"application/json"}, "notify_body": {`{"a":`}, "retries": {"x"}}
	resp := e.postForm(c, "/delayed", form)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad form: %d", resp.StatusCode)
	}
	var b strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	page := b.String()
	for _, want := range []string{`id="error-delay"`, `id="error-notify_body"`, `id="error-retries"`, `value="shop"`, `value="later"`} {
		if !strings.Contains(page, want) {
			t.Errorf("refused form lacks %s", want)
		}
	}
	if total, _ := countDelayed(t, e); total != 0 {
		t.Fatalf("a refused form stored %d tasks", total)
	}
	form.Set("delay", "1h")
	form.Set("notify_body", `{"a":1}`)
	form.Set("retries", "1")
	resp = e.postForm(c, "/delayed", form)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/delayed/") {
		t.Fatalf("create: %d %s", resp.StatusCode, loc)
	}
	id := strings.TrimPrefix(loc, "/delayed/")
	status, page := get(loc, false)
	if status != 200 || !strings.Contains(page, "Delayed task created") || !strings.Contains(page, id) || !strings.Contains(page, " UTC") ||
		!strings.Contains(page, `data-action="cancel"`) {
		t.Fatalf("detail: %d", status)
	}
	if status, frag := get(loc+"/live", true); status != 200 || !strings.Contains(frag, `id="delayed-live"`) || strings.Contains(frag, "<html") {
		t.Fatalf("live fragment: %d %s", status, frag)
	}
	if status, frag := get("/delayed/rows?status=pending", true); status != 200 || !strings.Contains(frag, "delayed-"+id) {
		t.Fatalf("rows fragment: %d %s", status, frag)
	}
	if status, frag := get("/delayed?status=cancelled", true); status != 200 || strings.Contains(frag, "delayed-"+id) {
		t.Fatalf("filtered rows: %d", status)
	}
	status, frag := e.do(c, http.MethodPost, "/delayed/"+id+"/cancel?from=detail", "", map[string]string{"HX-Request": "true"})
	if status != 200 || !strings.Contains(frag, "cancelled: it will not be sent") || !strings.Contains(frag, `data-testid="status">cancelled`) {
		t.Fatalf("cancel from the page: %d %s", status, frag)
	}
	status, frag = e.do(c, http.MethodPost, "/delayed/"+id+"/cancel", "", map[string]string{"HX-Request": "true"})
	if status != http.StatusConflict || !strings.Contains(frag, "cancelled already") || !strings.Contains(frag, `id="delayed-panel"`) {
		t.Fatalf("cancel twice from the list: %d %s", status, frag)
	}
	if status, _ := get("/delayed/nope", false); status != http.StatusNotFound {
		t.Fatalf("missing task page: %d", status)
	}
}

func countDelayed(t *testing.T, e *env) (int, error) {
	t.Helper()
	_, total, err := store.ListDelayed(context.Background(), e.st.DB, store.DelayedFilter{})
	return total, err
}
