package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// dbFingerprint dumps every row of the tables a request could change, so a
// refused request can be shown to have changed nothing.
func dbFingerprint(t *testing.T, st *store.Store) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"users", "nodes", "settings", "api_tokens", "tasks", "task_executors", "runs", "events", "sessions", "run_grants"} {
		rows, err := st.DB.QueryContext(context.Background(), "SELECT * FROM "+table+" ORDER BY 1")
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			fmt.Fprintf(&b, "%s %v\n", table, vals)
		}
		rows.Close()
	}
	return b.String()
}

// TestHostileTextInputIsRefused sends NUL bytes and invalid UTF-8 in path
// parameters, query values, form fields and JSON strings to many routes of
// the real router: each is a 400 naming the field, never a 500, and the
// database is unchanged.
func TestHostileTextInputIsRefused(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		admin := e.login("admin", "admin-password-1")
		e.addUser("vic", "vic-password-1", store.RoleViewer)
		if st, body := e.do(admin, "POST", "/api/v1/nodes", `{"name":"w9","host":"127.0.0.1:1","protocol":"http","priority":1,"max_concurrency":2}`, nil); st != http.StatusCreated && st != http.StatusOK {
			t.Fatalf("create node: %d %s", st, body)
		}
		st, body := e.do(admin, "POST", "/api/v1/tasks", `{"title":"t1","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},"http":{"method":"GET","url":"http://127.0.0.1:1/"},"executors":["w9"]}`, nil)
		if st != http.StatusCreated {
			t.Fatalf("create task: %d %s", st, body)
		}
		taskID := decode[struct {
			ID string `json:"id"`
		}](t, body).ID

		type probe struct {
			name, method, path string
			form               url.Values // sent as a URL-encoded form
			json               string     // sent as JSON
			field              string     // the field the answer must name
		}
		var probes []probe
		for _, bad := range []struct{ label, raw, pathEsc, jsonStr string }{
			{"NUL", "a\x00b", "a%00b", `"a\u0000b"`},
			{"invalid UTF-8", "a\xffb", "a%FFb", "\"a\xffb\""},
		} {
			q := url.QueryEscape(bad.raw)
			add := func(p probe) {
				p.name = bad.label + ": " + p.name
				probes = append(probes, p)
			}
			add(probe{name: "login name", method: "POST", path: "/login", form: url.Values{"username": {bad.raw}, "password": {"x"}}, field: "username"})
			add(probe{name: "task list filter", method: "GET", path: "/tasks?title=" + q, field: "title"})
			add(probe{name: "task rows filter", method: "GET", path: "/tasks/rows?node=" + q, field: "node"})
			add(probe{name: "API task filter", method: "GET", path: "/api/v1/tasks?title=" + q, field: "title"})
			add(probe{name: "event filter", method: "GET", path: "/events?actor=" + q, field: "actor"})
			add(probe{name: "API event filter", method: "GET", path: "/api/v1/events?action=" + q, field: "action"})
			add(probe{name: "query key", method: "GET", path: "/api/v1/nodes?" + q + "=1", field: "field name"})
			add(probe{name: "node path", method: "GET", path: "/api/v1/nodes/" + bad.pathEsc, field: "path"})
			add(probe{name: "node edit path", method: "GET", path: "/nodes/" + bad.pathEsc + "/edit", field: "path"})
			add(probe{name: "task path", method: "GET", path: "/tasks/" + bad.pathEsc, field: "path"})
			add(probe{name: "API task delete path", method: "DELETE", path: "/api/v1/tasks/" + bad.pathEsc, field: "path"})
			add(probe{name: "user path", method: "POST", path: "/users/" + bad.pathEsc + "/disable", form: url.Values{}, field: "path"})
			add(probe{name: "node form", method: "POST", path: "/nodes", form: url.Values{"name": {bad.raw}, "host": {"127.0.0.1:2"}, "protocol": {"http"}}, field: "name"})
			add(probe{name: "node edit form", method: "POST", path: "/nodes/w9", form: url.Values{"host": {bad.raw}, "protocol": {"http"}}, field: "host"})
			add(probe{name: "task form", method: "POST", path: "/tasks", form: url.Values{"title": {bad.raw}, "type": {"http"}}, field: "title"})
			add(probe{name: "task edit form", method: "POST", path: "/tasks/" + taskID, form: url.Values{"title": {"ok"}, "http_headers": {"X-A: " + bad.raw}}, field: "http_headers"})
			add(probe{name: "settings form", method: "POST", path: "/settings", form: url.Values{"webhook_url": {bad.raw}}, field: "webhook_url"})
			add(probe{name: "user form", method: "POST", path: "/users", form: url.Values{"username": {bad.raw}, "password": {"password-123"}}, field: "username"})
			add(probe{name: "user edit form", method: "POST", path: "/users/vic", form: url.Values{"role": {"viewer"}, "email": {bad.raw}}, field: "email"})
			add(probe{name: "own email", method: "POST", path: "/account/email", form: url.Values{"email": {bad.raw}}, field: "email"})
			add(probe{name: "form key", method: "POST", path: "/settings", form: url.Values{bad.raw: {"1"}}, field: "field name"})
			add(probe{name: "API task title", method: "POST", path: "/api/v1/tasks", json: `{"title":` + bad.jsonStr + `,"type":"http"}`, field: "title"})
			add(probe{name: "API task header", method: "PUT", path: "/api/v1/tasks/" + taskID,
				json: `{"title":"t1","type":"http","http":{"method":"GET","url":"http://127.0.0.1:1/","headers":{"X-A":` + bad.jsonStr + `}}}`, field: "http.headers.X-A"})
			add(probe{name: "API task executors", method: "PUT", path: "/api/v1/tasks/" + taskID, json: `{"title":"t1","executors":["w9",` + bad.jsonStr + `]}`, field: "executors[1]"})
			add(probe{name: "API node name", method: "POST", path: "/api/v1/nodes", json: `{"name":` + bad.jsonStr + `,"host":"127.0.0.1:3"}`, field: "name"})
			add(probe{name: "API user", method: "POST", path: "/api/v1/users", json: `{"username":` + bad.jsonStr + `,"password":"password-123"}`, field: "username"})
			add(probe{name: "API user patch", method: "PATCH", path: "/api/v1/users/vic", json: `{"email":` + bad.jsonStr + `}`, field: "email"})
			add(probe{name: "API JSON key", method: "PATCH", path: "/api/v1/users/vic", json: `{` + bad.jsonStr + `:"x"}`, field: "a"})
		}

		before := dbFingerprint(t, e.st)
		for _, p := range probes {
			var r io.Reader
			ct := ""
			switch {
			case p.form != nil:
				r, ct = strings.NewReader(p.form.Encode()), "application/x-www-form-urlencoded"
			case p.json != "":
				r, ct = strings.NewReader(p.json), "application/json"
			}
			req, err := http.NewRequest(p.method, e.srv.URL+p.path, r)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			resp, err := admin.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: %s %s: status %d, want 400: %.300s", p.name, p.method, p.path, resp.StatusCode, b)
				continue
			}
			if !strings.Contains(string(b), p.field) || !strings.Contains(string(b), "NUL byte or invalid UTF-8") {
				t.Errorf("%s: the answer does not name the field %q: %.300s", p.name, p.field, b)
			}
		}
		if after := dbFingerprint(t, e.st); after != before {
			t.Fatalf("refused requests changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// Clean input still works on the same routes.
		if st, body := e.do(admin, "GET", "/api/v1/tasks?title=t1", "", nil); st != 200 || !strings.Contains(body, taskID) {
			t.Fatalf("clean filter: %d %s", st, body)
		}
	})
}

// TestBodyLimits: multipart is refused unread (415), bodies over a route's
// limit are 413 whether Content-Length says so or not, and a task body up to
// its own (larger) limit is accepted.
func TestBodyLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	send := func(c *http.Client, method, path, ct string, body io.Reader, length int64) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, e.srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		req.Header.Set("Content-Type", ct)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	mp := "multipart/form-data; boundary=xyz"
	mpBody := "--xyz\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\nadmin\r\n--xyz--\r\n"
	for _, path := range []string{"/login", "/settings", "/api/v1/tasks"} {
		if st, body := send(admin, "POST", path, mp, strings.NewReader(mpBody), int64(len(mpBody))); st != http.StatusUnsupportedMediaType {
			t.Fatalf("multipart to %s: %d %s", path, st, body)
		}
	}
	big := "username=" + strings.Repeat("a", 300<<10)
	if st, _ := send(e.client(), "POST", "/login", "application/x-www-form-urlencoded", strings.NewReader(big), int64(len(big))); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("300 KiB login form: %d, want 413", st)
	}
	// Chunked: no Content-Length to check first, so the reader stops it.
	if st, _ := send(e.client(), "POST", "/login", "application/x-www-form-urlencoded", io.MultiReader(strings.NewReader(big)), -1); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 300 KiB login form: %d, want 413", st)
	}
	bigJSON := `{"username":"x","password":"` + strings.Repeat("a", 300<<10) + `"}`
	if st, _ := send(admin, "POST", "/api/v1/users", "application/json", io.MultiReader(strings.NewReader(bigJSON)), -1); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("300 KiB user JSON: %d, want 413", st)
	}
	// A task with a 512 KiB HTTP body fits the task limit (it fails later only
	// for want of an executor, which proves it was parsed).
	task := `{"title":"big","type":"http","schedule":{"kind":"cron","cron":"0 * * * *"},"http":{"method":"POST","url":"http://127.0.0.1:1/","body":"` + strings.Repeat("b", 512<<10) + `"}}`
	if st, body := send(admin, "POST", "/api/v1/tasks", "application/json", strings.NewReader(task), int64(len(task))); st != http.StatusBadRequest || !strings.Contains(body, "executors") {
		t.Fatalf("512 KiB task: %d %.200s, want 400 about executors", st, body)
	}
	huge := `{"title":"big","http":{"body":"` + strings.Repeat("b", 2<<20) + `"}}`
	if st, _ := send(admin, "POST", "/api/v1/tasks", "application/json", strings.NewReader(huge), int64(len(huge))); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB task: %d, want 413", st)
	}
}

// multipartFlood is a 40 MB multipart body made on the fly, never held whole.
type multipartFlood struct {
	left int64
	head bool
}

func (m *multipartFlood) Read(p []byte) (int, error) {
	if !m.head {
		m.head = true
		return copy(p, "--xyz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\n\r\n"), nil
	}
	if m.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), m.left)
	for i := range p[:n] {
		p[i] = 'x'
	}
	m.left -= n
	return int(n), nil
}

// TestMultipartFloodKeepsMemoryFlat: six parallel 40 MB multipart posts to
// the unauthenticated login form are refused without the master buffering
// them: its heap grows by less than 50 MB (a memory bound, not a timing one).
func TestMultipartFloodKeepsMemoryFlat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.srv.URL+"/login", &multipartFlood{left: 40 << 20})
			req.Header.Set("Content-Type", "multipart/form-data; boundary=xyz")
			if i%2 == 0 {
				req.ContentLength = 40<<20 + 80 // half announce their size, half stream chunked
			}
			resp, err := e.client().Do(req)
			if err != nil {
				statuses[i] = -1 // the server may close before the client finished writing
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	answered := 0
	for i, st := range statuses {
		switch st {
		case http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge:
			answered++
		case -1:
		default:
			t.Fatalf("post %d: status %d, want 415 or 413", i, st)
		}
	}
	if answered == 0 {
		t.Fatal("no post got an answer")
	}
	grew := int64(peak) - int64(base)
	t.Logf("answers %v; heap grew by %d KiB at its peak", statuses, grew>>10)
	if grew > 50<<20 {
		t.Fatalf("heap grew by %d MB during the flood, want < 50 MB", grew>>20)
	}
}
