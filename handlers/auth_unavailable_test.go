package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// When the database is unreachable, refused or hung, credentials that cannot
// be checked get 503 with Retry-After and a sentence, never "log in again";
// /ready says so while /health stays 200; all comes back with the database.
// A hung database answers within the request deadlines, not never: pages and
// the API within the authentication deadline (3 s), /ready within its ping
// timeout (2 s), a worker's claim within the claim deadline (4 s) as 503, so
// each within a worker's claim timeout (5 s).
func TestDatabaseDownIsNotLogInAgain(t *testing.T) {
	t.Parallel()
	for _, dialect := range storetest.ServerDialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			t.Run("refused", func(t *testing.T) {
				t.Parallel()
				testDatabaseDown(t, dialect, (*storetest.Proxy).Cut, 0)
			})
			t.Run("hung", func(t *testing.T) {
				t.Parallel()
				testDatabaseDown(t, dialect, (*storetest.Proxy).Hang, protocol.ClaimTimeout)
			})
		})
	}
}

// testDatabaseDown takes the database of the dialect away with fault;
// within, when not 0, bounds every answer given meanwhile (beyond it, the
// request hung).
func testDatabaseDown(t *testing.T, dialect string, fault func(*storetest.Proxy), within time.Duration) {
	ns, proxy := storetest.OpenProxied(t, dialect)
	e := newEnv(t, ns)
	admin := e.login("admin", "admin-password-1")
	st, body := e.do(admin, "POST", "/api/v1/tokens", `{"name":"ci"}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("create token: %d %s", st, body)
	}
	bearer := map[string]string{"Authorization": "Bearer " + decode[apiTokenJSON](t, body).Token}
	hx := map[string]string{"HX-Request": "true"}

	type probe struct {
		name   string
		c      *http.Client
		path   string
		hdr    map[string]string
		inBody string
	}
	probes := []probe{
		{"API with a session", admin, "/api/v1/nodes", nil, "the database is unreachable; retrying"},
		{"API with a token", e.client(), "/api/v1/tasks", bearer, "the database is unreachable; retrying"},
		{"page", admin, "/tasks", nil, "The database is unreachable"},
		{"htmx fragment", admin, "/tasks/rows", hx, "the database is unreachable; retrying"},
	}
	for _, p := range probes {
		if st, _ := e.do(p.c, "GET", p.path, "", p.hdr); st != http.StatusOK {
			t.Fatalf("%s before the fault: %d", p.name, st)
		}
	}
	if st, _ := e.do(e.client(), "GET", "/ready", "", nil); st != http.StatusOK {
		t.Fatalf("/ready before the fault: %d", st)
	}

	fault(proxy)
	timed := func(name string, took time.Duration) {
		t.Logf("%s answered after %s", name, took.Round(time.Millisecond))
		if within > 0 && took > within {
			t.Errorf("%s with the database down answered after %s, want within %s", name, took.Round(time.Millisecond), within)
		}
	}
	for _, p := range probes {
		req, _ := http.NewRequest("GET", e.srv.URL+p.path, nil)
		for k, v := range p.hdr {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := p.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		timed(p.name, time.Since(start))
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(b, p.inBody) {
			t.Errorf("%s with the database down: %d Retry-After=%q %.200s; want 503, Retry-After and %q",
				p.name, resp.StatusCode, resp.Header.Get("Retry-After"), b, p.inBody)
		}
		if loc := resp.Header.Get("Location") + resp.Header.Get("HX-Redirect"); strings.Contains(loc, "/login") {
			t.Errorf("%s sent to the login page with the database down", p.name)
		}
	}
	start := time.Now()
	if st, body := e.do(e.client(), "GET", "/ready", "", nil); st != http.StatusServiceUnavailable || !strings.Contains(body, "database is unreachable") {
		t.Errorf("/ready with the database down: %d %s, want 503", st, body)
	}
	timed("/ready", time.Since(start))
	if st, _ := e.do(e.client(), "GET", "/health", "", nil); st != http.StatusOK {
		t.Errorf("/health with the database down: %d, want 200", st)
	}
	{
		// A worker's claim: its node cannot be looked up, so the master
		// answers 503 with a sentence (within the claim deadline when the
		// database hangs), never a 500, and the worker, hedging, has its
		// answer from another master long before.
		start := time.Now()
		st, body := e.do(e.client(), "POST", protocol.PathMasterClaim, `{"task_id":"t1","fire_at":"2026-01-01T00:00:00Z"}`,
			map[string]string{protocol.HeaderNode: "w1", protocol.HeaderSecret: "s"})
		timed("a claim", time.Since(start))
		if st != http.StatusServiceUnavailable || !strings.Contains(body, "retrying") {
			t.Errorf("claim with the database down: %d %s, want 503 with a sentence", st, body)
		}
	}

	proxy.Restore()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range probes {
		for {
			st, _ := e.do(p.c, "GET", p.path, "", p.hdr)
			if st == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the database came back: %d", p.name, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if st, _ := e.do(e.client(), "GET", "/ready", "", nil); st != http.StatusOK {
		t.Errorf("/ready after the database came back: %d", st)
	}
}

// Every authenticated answer (page, fragment, API, metrics) is personal and
// carries Cache-Control: no-store.
func TestAuthenticatedAnswersAreNotCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	for _, p := range []struct {
		path string
		hdr  map[string]string
	}{
		{"/dashboard", nil}, {"/tasks", nil}, {"/tasks/rows", map[string]string{"HX-Request": "true"}},
		{"/nodes", nil}, {"/tokens", nil}, {"/settings", nil}, {"/events", nil},
		{"/api/v1/tasks", nil}, {"/api/v1/nodes", nil}, {"/api/v1/runs", nil}, {"/api/v1/tokens", nil},
		{"/api/v1/tasks/missing", nil}, {"/metrics", nil},
	} {
		req, _ := http.NewRequest("GET", e.srv.URL+p.path, nil)
		for k, v := range p.hdr {
			req.Header.Set(k, v)
		}
		resp, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s (%d): Cache-Control %q, want no-store", p.path, resp.StatusCode, got)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var sb strings.Builder
	if _, err := ioCopy(&sb, resp); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
