package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// otherMaster is a second master (engine and router) on e's database.
func (e *env) otherMaster() *env {
	e.t.Helper()
	log := storetest.Logger(e.t)
	m := master.New(master.Config{PasswordCost: testPasswordCost, Identity: "master-b", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:2",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: 500 * time.Millisecond, MaxFailures: 3}}, e.st, log)
	h, err := handlers.NewMasterRouter(storetest.Ctx(e.t), handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		e.t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	return &env{t: e.t, st: e.st, m: m, srv: srv}
}

// Two masters on one database: guesses spread over both are throttled as
// one client, and a session ended on one master is refused by the other.
func TestLoginThrottleAndSessionsHoldAcrossMasters(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		a := newEnv(t, s)
		b := a.otherMaster()
		c := a.client()
		for i := range 5 { // the per-user limit, alternating masters: each saw fewer
			on := []*env{a, b}[i%2]
			resp := on.postForm(c, "/login", url.Values{"username": {"admin"}, "password": {"guess-" + string(rune('a'+i))}})
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("guess %d: %d, want 401", i, resp.StatusCode)
			}
		}
		for name, on := range map[string]*env{"a": a, "b": b} {
			resp := on.postForm(c, "/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("right password on master %s after 5 spread guesses: %d, want 429", name, resp.StatusCode)
			}
		}

		// A session started on a is good on b; logged out on a, refused by b.
		a.addUser("carol", "carol-password-1", store.RoleAdmin)
		carol := a.login("carol", "carol-password-1")
		if st, _ := b.do(carol, http.MethodGet, "/nodes", "", nil); st != http.StatusOK {
			t.Fatalf("session of a on b: %d, want 200", st)
		}
		u, _ := url.Parse(a.srv.URL)
		stolen := a.client() // a copy of the cookie, kept after logout
		stolen.Jar.SetCookies(u, carol.Jar.Cookies(u))
		a.postForm(carol, "/logout", nil)
		if st, _ := b.do(stolen, http.MethodGet, "/nodes", "", nil); st != http.StatusSeeOther {
			t.Fatalf("ended session on b: %d, want 303 to the login", st)
		}
	})
}
