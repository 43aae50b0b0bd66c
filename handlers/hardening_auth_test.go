package handlers_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newEnvLogged is newEnv with the master's log captured and trusted proxies set.
func newEnvLogged(t *testing.T, proxies []string) (*env, *syncBuffer) {
	t.Helper()
	ns := storetest.OpenSQLite(t)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	m := master.New(master.Config{PasswordCost: testPasswordCost, Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: 500 * time.Millisecond, MaxFailures: 3}}, ns.Store, log)
	h, err := handlers.NewMasterRouter(storetest.Ctx(t), handlers.MasterDeps{Master: m, Log: log, TrustedProxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: ns.Store, m: m, srv: srv}
	e.addUser("admin", "admin-password-1", store.RoleAdmin)
	return e, logs
}

func loginWith(e *env, user, password string, hdr map[string]string) int {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/login", strings.NewReader(url.Values{"username": {user}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLoginThrottleIgnoresSpoofedForwardedFor: with no trusted proxy, 300
// guesses each with a new X-Forwarded-For / X-Real-IP are throttled on the
// real peer, and the log names the real peer, never the spoofed address.
func TestLoginThrottleIgnoresSpoofedForwardedFor(t *testing.T) {
	t.Parallel()
	e, logs := newEnvLogged(t, nil)
	throttled := 0
	for i := range 300 {
		spoof := map[string]string{"X-Forwarded-For": "198.51.100." + strconv.Itoa(i%250), "X-Real-IP": "203.0.113." + strconv.Itoa(i%250)}
		if loginWith(e, "admin", "wrong-guess", spoof) == http.StatusTooManyRequests {
			throttled++
		}
	}
	if throttled < 250 {
		t.Fatalf("%d of 300 spoofed guesses throttled, want nearly all (all after the first few)", throttled)
	}
	out := logs.String()
	if !strings.Contains(out, "ip=127.0.0.1") {
		t.Fatalf("the log does not name the real peer:\n%.500s", out)
	}
	if strings.Contains(out, "198.51.100.") || strings.Contains(out, "203.0.113.") {
		t.Fatal("the log names a spoofed address")
	}
}

// TestLoginThrottleTrustedProxy: behind a configured proxy the forwarded
// address is the client: it is logged and throttled on its own.
func TestLoginThrottleTrustedProxy(t *testing.T) {
	t.Parallel()
	e, logs := newEnvLogged(t, []string{"127.0.0.1"})
	a := map[string]string{"X-Forwarded-For": "198.51.100.7"}
	throttled := false
	for range 30 {
		if loginWith(e, "admin", "wrong-guess", a) == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Fatal("30 guesses from one forwarded client were not throttled")
	}
	if !strings.Contains(logs.String(), "ip=198.51.100.7") {
		t.Fatalf("the log does not name the forwarded client:\n%.500s", logs.String())
	}
	// Another client behind the same proxy is not throttled for it.
	if st := loginWith(e, "admin", "admin-password-1", map[string]string{"X-Forwarded-For": "198.51.100.8"}); st != http.StatusSeeOther {
		t.Fatalf("other forwarded client: %d, want 303", st)
	}
}

// sessionCookie returns the session cookie a client holds.
func sessionCookie(t *testing.T, e *env, c *http.Client) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(e.srv.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "sm_session" {
			return ck
		}
	}
	t.Fatal("no session cookie")
	return nil
}

// replay sends a request with only the given cookie.
func replay(t *testing.T, e *env, ck *http.Cookie, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	req.AddCookie(ck)
	resp, err := e.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestSessionsAreRevokedOnTheServer: logout, disable (then enable), role
// change and password reset end sessions on the server, so a replayed cookie
// gets 401 on the API and the login page on pages. One's own password change
// keeps the current session and ends the others. Expired rows are pruned at
// login.
func TestSessionsAreRevokedOnTheServer(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		ctx := context.Background()
		admin := e.login("admin", "admin-password-1")

		// Logout.
		c := e.login("admin", "admin-password-1")
		ck := sessionCookie(t, e, c)
		if st, _ := replay(t, e, ck, "/api/v1/nodes"); st != http.StatusOK {
			t.Fatalf("live cookie: %d", st)
		}
		if resp := e.postForm(c, "/logout", nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout: %d", resp.StatusCode)
		}
		if st, _ := replay(t, e, ck, "/api/v1/nodes"); st != http.StatusUnauthorized {
			t.Fatalf("replayed cookie after logout on the API: %d, want 401", st)
		}
		if st, loc := replay(t, e, ck, "/dashboard"); st != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
			t.Fatalf("replayed cookie after logout on a page: %d %q, want the login", st, loc)
		}

		// Disable, then enable: the old cookie stays dead.
		e.addUser("vic", "vic-password-1", store.RoleViewer)
		v := e.login("vic", "vic-password-1")
		ck = sessionCookie(t, e, v)
		if resp := e.postForm(admin, "/users/vic/disable", nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("disable vic: %d", resp.StatusCode)
		}
		if resp := e.postForm(admin, "/users/vic/enable", nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("enable vic: %d", resp.StatusCode)
		}
		if st, _ := replay(t, e, ck, "/api/v1/nodes"); st != http.StatusUnauthorized {
			t.Fatalf("cookie from before disable+enable: %d, want 401", st)
		}

		// Role change (API): dead; an edit that keeps the role: alive.
		v = e.login("vic", "vic-password-1")
		ck = sessionCookie(t, e, v)
		if resp := e.postForm(admin, "/users/vic", url.Values{"role": {"viewer"}, "email": {"vic@example.com"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("edit vic's email: %d", resp.StatusCode)
		}
		if st, _ := replay(t, e, ck, "/api/v1/nodes"); st != http.StatusOK {
			t.Fatalf("cookie after an edit that kept the role: %d, want 200", st)
		}
		if st, body := e.do(admin, "PATCH", "/api/v1/users/vic", `{"role":"admin"}`, nil); st != http.StatusOK {
			t.Fatalf("promote vic: %d %s", st, body)
		}
		if st, _ := replay(t, e, ck, "/api/v1/nodes"); st != http.StatusUnauthorized {
			t.Fatalf("cookie after a role change: %d, want 401", st)
		}

		// Password reset by an admin: dead.
		v = e.login("vic", "vic-password-1")
		ck = sessionCookie(t, e, v)
		if resp := e.postForm(admin, "/users/vic/password", url.Values{"password": {"vic-password-2"}, "password_confirm": {"vic-password-2"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("reset vic's password: %d", resp.StatusCode)
		}
		if st, _ := replay(t, e, ck, "/api/v1/nodes"); st != http.StatusUnauthorized {
			t.Fatalf("cookie after a password reset: %d, want 401", st)
		}

		// Own password change: this session goes on, the other one ends.
		v1 := e.login("vic", "vic-password-2")
		v2 := e.login("vic", "vic-password-2")
		if resp := e.postForm(v1, "/account/password", url.Values{"current_password": {"vic-password-2"},
			"new_password": {"vic-password-3"}, "new_password_confirm": {"vic-password-3"}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("own password change: %d", resp.StatusCode)
		}
		if st, _ := e.do(v1, "GET", "/api/v1/nodes", "", nil); st != http.StatusOK {
			t.Fatalf("own session after own password change: %d, want 200", st)
		}
		if st, _ := e.do(v2, "GET", "/api/v1/nodes", "", nil); st != http.StatusUnauthorized {
			t.Fatalf("other session after own password change: %d, want 401", st)
		}

		// Expired sessions are pruned at the next login.
		old := &store.Session{ID: store.HashSessionToken("expired"), Username: "vic", CreatedAt: time.Now().Add(-9 * 24 * time.Hour),
			ExpiresAt: time.Now().Add(-time.Hour)}
		if err := store.CreateSession(ctx, e.st.DB, old); err != nil {
			t.Fatal(err)
		}
		e.login("admin", "admin-password-1")
		n, err := e.st.DB.NewSelect().Model((*store.Session)(nil)).Where("id = ?", old.ID).Count(ctx)
		if err != nil || n != 0 {
			t.Fatalf("expired session still stored: %d %v", n, err)
		}
	})
}

// TestLoginNextStaysOnSite: a hostile next is replaced by /dashboard at login.
func TestLoginNextStaysOnSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	for next, want := range map[string]string{
		"/tasks?title=a":       "/tasks?title=a",
		"/\t/evil.example":     "/dashboard",
		"/\\/evil.example":     "/dashboard",
		"//evil.example":       "/dashboard",
		"/%2F/evil.example":    "/dashboard",
		"https://evil.example": "/dashboard",
	} {
		resp := e.postForm(e.client(), "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}, "next": {next}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("next %q: %d to %q, want %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}
