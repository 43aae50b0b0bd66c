package handlers_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func TestLoginSessionAndLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.client()

	resp, err := c.Get(e.srv.URL + "/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("anonymous /nodes: %d %q, want redirect to /login", resp.StatusCode, resp.Header.Get("Location"))
	}

	resp = e.postForm(c, "/login", url.Values{"username": {"admin"}, "password": {"wrong-password"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", resp.StatusCode)
	}
	resp = e.postForm(c, "/login", url.Values{"username": {"nobody"}, "password": {"whatever-pass"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown user: %d, want 401", resp.StatusCode)
	}

	resp = e.postForm(c, "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("login: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "sm_session" {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode {
		t.Fatalf("session cookie %+v: want HttpOnly and SameSite=Lax", cookie)
	}

	status, body := e.do(c, "GET", "/nodes", "", nil)
	if status != 200 || !strings.Contains(body, `id="node-rows"`) || !strings.Contains(body, "master") {
		t.Fatalf("/nodes after login: %d", status)
	}

	resp = e.postForm(c, "/logout", nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	status, _ = e.do(c, "GET", "/nodes", "", nil)
	if status != http.StatusSeeOther {
		t.Fatalf("/nodes after logout: %d, want 303", status)
	}
}

func TestLoginThrottling(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.client()
	for i := 0; i < 5; i++ {
		resp := e.postForm(c, "/login", url.Values{"username": {"admin"}, "password": {"guess-" + string(rune('a'+i))}})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i, resp.StatusCode)
		}
	}
	// Even the right password is refused while throttled.
	resp := e.postForm(c, "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("throttled login: %d retry-after %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	before := e.nodeCount()
	status, _ := e.do(c, "POST", "/nodes", "", map[string]string{
		"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded",
	})
	if status != http.StatusForbidden {
		t.Fatalf("cross-site POST: %d, want 403", status)
	}
	if e.nodeCount() != before {
		t.Fatal("a cross-site POST changed the node table")
	}
}

func TestSecurityHeadersAndNoInlineScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	req, _ := http.NewRequest("GET", e.srv.URL+"/nodes", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("CSP %q", csp)
	}
	_, body := e.do(c, "GET", "/nodes", "", nil)
	if regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>`).MatchString(body) || strings.Contains(body, " style=") || strings.Contains(body, " onclick=") {
		t.Fatal("nodes page has inline script or style")
	}
}

func TestNodesFragmentForHTMX(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	status, body := e.do(c, "GET", "/nodes", "", map[string]string{"HX-Request": "true"})
	// The live fragment: counters and rows together, never the page.
	if status != 200 || !strings.HasPrefix(strings.TrimSpace(body), `<div id="nodes-live"`) || !strings.Contains(body, `<tbody id="node-rows"`) ||
		!strings.Contains(body, `id="count-running"`) || strings.Contains(body, "<html") {
		t.Fatalf("htmx /nodes: %d %.80q, want the live fragment only", status, body)
	}
}

func TestNodeFormInlineErrorsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	before := e.nodeCount()
	cases := []struct {
		form  url.Values
		field string
	}{
		{url.Values{"name": {"bad name!"}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"1"}, "max_concurrency": {"5"}}, "name"},
		{url.Values{"name": {"w1"}, "protocol": {"http"}, "host": {"127.0.0.1"}, "priority": {"1"}, "max_concurrency": {"5"}}, "host"},
		{url.Values{"name": {"w1"}, "protocol": {"http"}, "host": {"127.0.0.1:70000"}, "priority": {"1"}, "max_concurrency": {"5"}}, "host"},
		{url.Values{"name": {"w1"}, "protocol": {"gopher"}, "host": {"127.0.0.1:30001"}, "priority": {"1"}, "max_concurrency": {"5"}}, "protocol"},
		{url.Values{"name": {"w1"}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"-1"}, "max_concurrency": {"5"}}, "priority"},
		{url.Values{"name": {"w1"}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"x"}, "max_concurrency": {"5"}}, "priority"},
		{url.Values{"name": {"w1"}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"1"}, "max_concurrency": {"0"}}, "max_concurrency"},
		{url.Values{"name": {"master"}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"1"}, "max_concurrency": {"5"}}, "name"},
	}
	for _, tc := range cases {
		resp := e.postForm(c, "/nodes", tc.form)
		buf := new(strings.Builder)
		_, _ = ioCopy(buf, resp)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(buf.String(), `id="error-`+tc.field+`"`) {
			t.Errorf("form %v: status %d, want 422 with inline error on %s", tc.form, resp.StatusCode, tc.field)
		}
	}
	if e.nodeCount() != before {
		t.Fatal("a refused form created a node")
	}
	// A valid form creates the node; the same name again is an inline duplicate error.
	ok := url.Values{"name": {"w1"}, "protocol": {"http"}, "host": {"127.0.0.1:30001"}, "priority": {"2"}, "max_concurrency": {"5"}}
	if resp := e.postForm(c, "/nodes", ok); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("valid form: %d", resp.StatusCode)
	}
	if n := e.node("w1"); n.Status != store.StatusOffline || n.Mode != store.ModeManual || n.Priority != 2 {
		t.Fatalf("created node %+v", n)
	}
	resp := e.postForm(c, "/nodes", ok)
	buf := new(strings.Builder)
	_, _ = ioCopy(buf, resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(buf.String(), "already taken") {
		t.Fatalf("duplicate: %d", resp.StatusCode)
	}
}

func TestViewerCannotChangeAnything(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("viewer", "viewer-password", store.RoleViewer)
	c := e.login("viewer", "viewer-password")
	before := e.nodeCount()
	status, body := e.do(c, "GET", "/nodes", "", nil)
	if status != 200 || strings.Contains(body, `id="add-node"`) || strings.Contains(body, "cluster-key") {
		t.Fatalf("viewer nodes page: %d; must not show Add node or the cluster key", status)
	}
	status, _ = e.do(c, "POST", "/api/v1/nodes", `{"name":"w9","host":"127.0.0.1:30009"}`, nil)
	if status != http.StatusForbidden {
		t.Fatalf("viewer API create: %d, want 403", status)
	}
	resp := e.postForm(c, "/nodes", url.Values{"name": {"w9"}, "protocol": {"http"}, "host": {"127.0.0.1:30009"}, "priority": {"1"}, "max_concurrency": {"5"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer form create: %d, want 403", resp.StatusCode)
	}
	if e.nodeCount() != before {
		t.Fatal("viewer created a node")
	}
}

func TestPasswordChangeEndsOtherSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("carol", "carol-password-1", store.RoleViewer)
	other := e.login("carol", "carol-password-1")
	self := e.login("carol", "carol-password-1")
	resp := e.postForm(self, "/account/password", url.Values{
		"current_password": {"carol-password-1"}, "new_password": {"carol-password-2x"}, "new_password_confirm": {"carol-password-2x"},
	})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("change own password: %d", resp.StatusCode)
	}
	if status, _ := e.do(self, "GET", "/nodes", "", nil); status != http.StatusOK {
		t.Fatalf("the session that changed the password: %d, want to stay logged in", status)
	}
	if status, _ := e.do(other, "GET", "/nodes", "", nil); status != http.StatusSeeOther {
		t.Fatalf("another session after the password change: %d, want a redirect to log in", status)
	}
}
