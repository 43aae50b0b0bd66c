package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// usersPressableJS lists the labels of every button or button-like link whose
// label starts with a change verb (Log out and the pager do not), "" for none.
const usersPressableJS = `[...document.querySelectorAll('button, a.btn, input[type=submit]')]
	.map(e => (e.textContent || e.value || '').trim())
	.filter(t => /^(Add|New|Create|Connect|Delete|Start|Stop|Pause|Resume|Run|Enable|Disable|Edit|Revoke|Reset|Save)\b/i.test(t))
	.join('|')`

// usersPostFormsJS counts the forms that post (all but Log out).
const usersPostFormsJS = `String([...document.querySelectorAll('form')]
	.filter(f => (f.getAttribute('method') || '').toLowerCase() === 'post' || f.hasAttribute('hx-post'))
	.filter(f => !f.classList.contains('logout') && !f.classList.contains('project-switch') && !f.classList.contains('lang-switch')).length)`

// usersFetchJS posts from the page (same origin, with the session cookie) and
// gives the status.
func usersFetchJS(method, path, contentType, body string) string {
	return fmt.Sprintf(`fetch(%q, {method: %q, headers: {"Content-Type": %q}, body: %q, credentials: "same-origin", redirect: "manual"}).then(r => String(r.status))`,
		path, method, contentType, body)
}

// TestBrowserViewerCannotPress: an admin creates a viewer with the /users
// form in a real Chromium against a real master process, logs out, and the
// viewer logs in. On /nodes, /tasks and /users the viewer finds nothing to
// press (while the admin did), and change requests forced from the page with
// fetch, and by a Go client holding the viewer's session cookie, get 403 and
// change nothing. Last, the admin disables the viewer from the list (confirm
// dialog) and the viewer's session stops working.
func TestBrowserViewerCannotPress(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	m := startMaster(t, "")

	// Something to act on: a manual node (offline) and a task on it.
	if st, body := m.api("POST", "/api/v1/nodes", `{"name":"vw1","host":"127.0.0.1:1"}`); st != http.StatusCreated {
		t.Fatalf("create node vw1: %d %s", st, body)
	}
	tk := m.createTask(`{"title":"viewer-proof","type":"http","schedule":{"kind":"interval","every":"1h"},
		"http":{"method":"GET","url":"http://127.0.0.1:1/"},"timeout":"5s","executors":["vw1"]}`)

	b := newBrowser(t, chromium)
	b.logIn(m, "", "account-link")
	b.do("open /nodes as admin", 20*time.Second,
		chromedp.Navigate(m.URL+"/nodes"),
		chromedp.WaitVisible(chromedp.ID("nodes-table")),
	)
	// The check below does see an admin's buttons.
	b.wait("admin's node buttons", 10*time.Second, usersPressableJS, func(s string) bool {
		return strings.Contains(s, "Add node") && strings.Contains(s, "Connect") && strings.Contains(s, "Delete")
	})

	// Create the viewer in the form: first with a short password, refused inline.
	b.do("open Users from the menu", 20*time.Second,
		chromedp.Click(chromedp.CSS(`header.topbar nav a[href="/users"]`)),
		chromedp.WaitVisible(chromedp.ID("user-form")),
	)
	b.wait("admin's row", 10*time.Second, attrJS("#user-admin", "data-role"), equals("admin"))
	b.do("submit a short password", 20*time.Second,
		sendKeys(chromedp.ID("username"), "vera"),
		sendKeys(chromedp.ID("email"), "vera@example.com"),
		sendKeys(chromedp.ID("password"), "short"),
		sendKeys(chromedp.ID("password_confirm"), "short"),
		chromedp.Click(chromedp.ID("create-user")),
		chromedp.WaitVisible(chromedp.ID("error-password")),
	)
	b.wait("inline password error", 5*time.Second, textJS("#error-password"), contains("at least 10"))
	b.wait("username kept", 5*time.Second, `document.getElementById("username").value`, equals("vera"))
	if u := usersGet(t, m, "vera"); u != nil {
		t.Fatalf("a user with a short password was stored: %+v", u)
	}
	b.do("submit a good password", 20*time.Second,
		sendKeys(chromedp.ID("password"), "vera-password-1"),
		sendKeys(chromedp.ID("password_confirm"), "vera-password-1"),
		chromedp.Click(chromedp.ID("create-user")),
		chromedp.WaitVisible(chromedp.ID("user-vera")),
	)
	b.wait("created flash", 10*time.Second, textJS("#flash .flash-ok"), contains("User vera created (viewer)"))
	b.wait("vera is a viewer", 5*time.Second, attrJS("#user-vera", "data-role"), equals("viewer"))
	b.wait("admin's user buttons", 5*time.Second, usersPressableJS, func(s string) bool {
		return strings.Contains(s, "Create user") && strings.Contains(s, "Disable")
	})
	if u := usersGet(t, m, "vera"); u == nil || u.Role != "viewer" || u.Email != "vera@example.com" || u.Disabled {
		t.Fatalf("vera after create: %+v", u)
	}

	if dir := os.Getenv("SM_SCREENSHOT_USERS_DIR"); dir != "" {
		b.screenshot(dir + "/users-admin.png")
		b.do("open vera's edit page", 20*time.Second,
			chromedp.Navigate(m.URL+"/users/vera/edit"),
			chromedp.WaitVisible(chromedp.ID("user-edit-form")),
		)
		b.screenshot(dir + "/user-edit.png")
		b.do("open the account page", 20*time.Second,
			chromedp.Click(chromedp.ID("account-link")),
			chromedp.WaitVisible(chromedp.ID("account-password-form")),
		)
		b.screenshot(dir + "/account.png")
	}

	// Log out, log in as the viewer.
	b.do("log out", 20*time.Second,
		chromedp.Click(chromedp.CSS(`form.logout button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("login-submit")),
	)
	b.submitLogin("vera", "vera-password-1", "account-link")
	b.wait("logged in as vera", 5*time.Second, textJS("#account-link"), equals("vera (viewer)"))

	for _, pg := range []struct{ path, ready, row, live string }{
		{"/nodes", "nodes-table", "#node-vw1", "#node-rows"},
		{"/tasks", "tasks-table", "#task-" + tk.ID, "#task-rows"},
		{"/users", "users-table", "#user-vera", ""}, // not a live table
	} {
		b.do("open "+pg.path, 20*time.Second,
			chromedp.Navigate(m.URL+pg.path),
			chromedp.WaitVisible(chromedp.ID(pg.ready)),
		)
		b.wait(pg.path+": the rows are there", 10*time.Second, existsJS(pg.row), equals("true"))
		b.wait(pg.path+": nothing to press", 5*time.Second, usersPressableJS, equals(""))
		b.wait(pg.path+": no form that posts", 5*time.Second, usersPostFormsJS, equals("0"))
		if pg.live == "" {
			continue
		}
		// Live rows refresh themselves: look again once a refresh has
		// replaced the marked rows (htmx swaps them outerHTML).
		b.wait(pg.path+": mark the rows", 5*time.Second, markJS(pg.live), equals("marked"))
		b.wait(pg.path+": the rows refreshed", 10*time.Second, refreshedJS(pg.live), equals("true"))
		b.wait(pg.path+": nothing to press after a refresh", 5*time.Second, usersPressableJS, equals(""))
		b.wait(pg.path+": no form that posts after a refresh", 5*time.Second, usersPostFormsJS, equals("0"))
	}

	// Forced from the page: fetch sends the session cookie and passes the
	// cross-origin check (same origin), and is refused by role.
	before := usersSnapshot(t, m, tk.ID)
	form := "application/x-www-form-urlencoded"
	forced := []struct{ method, path, ctype, body string }{
		{"POST", "/users", form, "username=mallory&role=admin&password=mallory-password&password_confirm=mallory-password"},
		{"POST", "/users/admin/disable", form, ""},
		{"POST", "/users/admin", form, "role=viewer&email=x%40example.com"},
		{"POST", "/users/admin/password", form, "password=owned-password&password_confirm=owned-password"},
		{"POST", "/users/vera", form, "role=admin&email="},
		{"POST", "/nodes", form, "name=evil&protocol=http&host=127.0.0.1%3A2&priority=1&max_concurrency=5"},
		{"POST", "/nodes/vw1/delete", form, ""},
		{"POST", "/nodes/vw1/connect", form, ""},
		{"POST", "/tasks/" + tk.ID + "/start", form, ""},
		{"POST", "/tasks/" + tk.ID + "/delete", form, ""},
		{"POST", "/api/v1/users", "application/json", `{"username":"mallory","password":"mallory-password","role":"admin"}`},
		{"PATCH", "/api/v1/users/vera", "application/json", `{"role":"admin"}`},
		{"PATCH", "/api/v1/users/admin", "application/json", `{"disabled":true}`},
		{"DELETE", "/api/v1/nodes/vw1", "application/json", ""},
	}
	for _, f := range forced {
		if st := usersEval(b, "fetch "+f.method+" "+f.path, usersFetchJS(f.method, f.path, f.ctype, f.body)); st != "403" {
			t.Errorf("fetch from the page as vera: %s %s: %s, want 403", f.method, f.path, st)
		}
	}
	if v := usersEval(b, "fetch /users", `fetch("/users").then(r => r.ok && r.url.endsWith("/users") ? "ok" : String(r.status))`); v != "ok" {
		t.Fatalf("vera's session after the forced requests: %s", v)
	}

	// The same with a Go client holding the browser's session cookie.
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{m.URL}})
	if err != nil {
		t.Fatalf("read the browser's cookies: %v", err)
	}
	var session *http.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "sm_session" {
			session = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	if session == nil {
		t.Fatal("no sm_session cookie in the browser")
	}
	gc := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, ctype, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, m.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.AddCookie(session)
		resp, err := gc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send("GET", "/users", "", ""); st != http.StatusOK {
		t.Fatalf("Go client with vera's cookie: GET /users %d, want 200 (the cookie works)", st)
	}
	for _, f := range forced {
		if st := send(f.method, f.path, f.ctype, f.body); st != http.StatusForbidden {
			t.Errorf("Go client with vera's cookie: %s %s: %d, want 403", f.method, f.path, st)
		}
	}
	if after := usersSnapshot(t, m, tk.ID); after != before {
		t.Fatalf("forced requests changed something:\nbefore %s\nafter  %s", before, after)
	}

	// Back as admin: Disable vera from the list (confirm dialog, htmx), and her
	// session stops working at once.
	b.do("log out vera", 20*time.Second,
		chromedp.Click(chromedp.CSS(`form.logout button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("login-submit")),
	)
	b.submitLogin("admin", adminPassword, "account-link")
	b.do("open /users as admin again", 20*time.Second,
		chromedp.Navigate(m.URL+"/users"),
		chromedp.WaitVisible(chromedp.ID("users-table")),
	)
	b.do("click Disable on vera", 20*time.Second, chromedp.Click(chromedp.CSS(`button[data-action=disable][data-user=vera]`)))
	b.wait("Disable flash", 20*time.Second, textJS("#flash .flash-ok"), contains("User vera disabled"))
	b.wait("vera's row disabled", 5*time.Second, attrJS("#user-vera", "data-disabled"), equals("true"))
	if d := b.dialogMessages(); len(d) != 1 || !strings.Contains(d[0], "Disable user vera?") {
		t.Fatalf("confirm dialogs: %q, want one to disable vera", d)
	}
	if u := usersGet(t, m, "vera"); u == nil || !u.Disabled {
		t.Fatalf("vera after Disable: %+v", u)
	}
	if st := send("GET", "/users", "", ""); st != http.StatusSeeOther {
		t.Fatalf("vera's old session after Disable: GET /users %d, want 303 to the login", st)
	}
	b.checkConsole()

	if path := os.Getenv("SM_SCREENSHOT_USERS"); path != "" {
		b.do("open /users for the screenshot", 20*time.Second,
			chromedp.Navigate(m.URL+"/users"),
			chromedp.WaitVisible(chromedp.ID("users-table")),
		)
		b.screenshot(path)
	}
}

type usersUserJSON struct {
	Username string `json:"username"`
	Role     string `json:"role"`
	Email    string `json:"email"`
	Disabled bool   `json:"disabled"`
}

// usersGet returns the named user from the API (as admin), or nil.
func usersGet(t *testing.T, m *masterProc, name string) *usersUserJSON {
	t.Helper()
	st, body := m.api("GET", "/api/v1/users/"+url.PathEscape(name), "")
	if st == http.StatusNotFound {
		return nil
	}
	if st != http.StatusOK {
		t.Fatalf("get user %s: %d %s", name, st, body)
	}
	var u usersUserJSON
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	return &u
}

// usersSnapshot is what the forced requests must not change: the users, the
// nodes and the task, as the admin's API shows them.
func usersSnapshot(t *testing.T, m *masterProc, taskID string) string {
	t.Helper()
	var parts []string
	for _, path := range []string{"/api/v1/users", "/api/v1/nodes", "/api/v1/tasks/" + taskID} {
		st, body := m.api("GET", path, "")
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, usersStable(v))
	}
	return strings.Join(parts, "\n")
}

// usersStable drops the fields that move by themselves (health checks, times).
func usersStable(v any) string {
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, val := range x {
				switch k {
				case "last_seen", "failures", "reason", "next_run", "next_run_at", "updated_at", "last_run", "last_run_at":
					continue
				}
				out[k] = strip(val)
			}
			return out
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
			return x
		}
		return v
	}
	b, _ := json.Marshal(strip(v))
	return string(b)
}

// usersEval evaluates expr once, awaiting a promise, and returns its string.
func usersEval(b *browser, what, expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatalf("%s: %v", what, err)
	}
	return v
}

// markJS tags the element sel with a property a swap does not carry over.
func markJS(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return "absent"; e.smSeen = true; return "marked"; })()`,
		strconv.Quote(sel))
}

// refreshedJS is "true" once the element sel marked by markJS was replaced.
func refreshedJS(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); return String(e !== null && !e.smSeen); })()`,
		strconv.Quote(sel))
}
