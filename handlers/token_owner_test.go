package handlers_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

type apiTokenJSON struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	CreatedBy  string     `json:"created_by"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Revoked    bool       `json:"revoked"`
	Expired    bool       `json:"expired"`
	Token      string     `json:"token"`
}

// A token acts as its owner now: the owner's role and state at each request
// decide, never what they were when the token was made.
func TestTokenActsAsItsOwnerNow(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		admin := e.login("admin", "admin-password-1")
		e.addUser("alice", "alice-password-1", store.RoleAdmin)
		alice := e.login("alice", "alice-password-1")
		st, body := e.do(alice, "POST", "/api/v1/tokens", `{"name":"ci"}`, nil)
		if st != http.StatusCreated {
			t.Fatalf("create token: %d %s", st, body)
		}
		tok := decode[apiTokenJSON](t, body)
		if !strings.HasPrefix(tok.Token, store.TokenPrefix) || tok.CreatedBy != "alice" || tok.ExpiresAt != nil {
			t.Fatalf("token answer %+v", tok)
		}
		anon := e.client()
		bearer := map[string]string{"Authorization": "Bearer " + tok.Token}
		write := func() int {
			st, body := e.do(anon, "POST", "/api/v1/nodes", `{"name":"w-`+storetest.RandomHex(t, 3)+`","host":"127.0.0.1:1","protocol":"http","priority":1,"max_concurrency":2}`, bearer)
			if st >= 500 {
				t.Fatalf("write: %d %s", st, body)
			}
			return st
		}
		read := func() int { st, _ := e.do(anon, "GET", "/api/v1/nodes", "", bearer); return st }
		if got := write(); got != http.StatusCreated {
			t.Fatalf("admin's token writes: %d, want 201", got)
		}

		// Demoted: reads still work, writes are forbidden.
		if st, body := e.do(admin, "PATCH", "/api/v1/users/alice", `{"role":"viewer"}`, nil); st != http.StatusOK {
			t.Fatalf("demote: %d %s", st, body)
		}
		if got := write(); got != http.StatusForbidden {
			t.Fatalf("demoted owner's token writes: %d, want 403", got)
		}
		// A task that does not exist is missing for every role alike.
		if st, _ := e.do(anon, "DELETE", "/api/v1/tasks/none", "", bearer); st != http.StatusNotFound {
			t.Fatalf("demoted owner's token deletes a missing task: %d, want 404", st)
		}
		if got := read(); got != http.StatusOK {
			t.Fatalf("demoted owner's token reads: %d, want 200", got)
		}

		// Disabled: nothing works, and the answer says why.
		if st, body := e.do(admin, "PATCH", "/api/v1/users/alice", `{"role":"admin","disabled":true}`, nil); st != http.StatusOK {
			t.Fatalf("disable: %d %s", st, body)
		}
		st, body = e.do(anon, "GET", "/api/v1/nodes", "", bearer)
		if st != http.StatusUnauthorized || !strings.Contains(body, "owner is disabled") {
			t.Fatalf("disabled owner's token: %d %s, want 401 saying the owner is disabled", st, body)
		}
		if st, body := e.do(admin, "PATCH", "/api/v1/users/alice", `{"disabled":false}`, nil); st != http.StatusOK {
			t.Fatalf("enable: %d %s", st, body)
		}
		if got := write(); got != http.StatusCreated {
			t.Fatalf("re-enabled admin's token writes: %d, want 201", got)
		}

		// Gone: an owner removed from the database takes the token along.
		if _, err := ns.Store.DB.NewDelete().Model((*store.User)(nil)).Where("username = ?", "alice").Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		st, body = e.do(anon, "GET", "/api/v1/nodes", "", bearer)
		if st != http.StatusUnauthorized || !strings.Contains(body, "no longer exists") {
			t.Fatalf("deleted owner's token: %d %s, want 401", st, body)
		}
	})
}

// Tokens may expire; an expired one is refused with a sentence saying so, and
// the list shows expiry and last use.
func TestTokenExpiryAndLastUse(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		admin := e.login("admin", "admin-password-1")
		for _, bad := range []string{
			`{"name":"x","expires_at":"2020-01-01T00:00:00Z"}`,
			`{"name":"x","expires_at":"tomorrow"}`,
			`{"name":"x","expires_at":"2999-01-01"}`,
			`{"name":"","expires_at":null}`,
			`{"name":"` + strings.Repeat("n", 65) + `"}`,
			`{"name":"a\u0000b"}`,
		} {
			st, body := e.do(admin, "POST", "/api/v1/tokens", bad, nil)
			if st != http.StatusBadRequest || !strings.Contains(body, `"fields"`) {
				t.Errorf("%s: %d %s, want 400 naming the field", bad, st, body)
			}
		}
		if ts := listTokens(t, e, admin); len(ts) != 0 {
			t.Fatalf("refused creations stored tokens: %+v", ts)
		}
		exp := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		st, body := e.do(admin, "POST", "/api/v1/tokens", `{"name":"short","expires_at":"`+exp.Format(time.RFC3339)+`"}`, nil)
		if st != http.StatusCreated {
			t.Fatalf("create: %d %s", st, body)
		}
		tok := decode[apiTokenJSON](t, body)
		if tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(exp) {
			t.Fatalf("expires_at %v, want %v", tok.ExpiresAt, exp)
		}
		bearer := map[string]string{"Authorization": "Bearer " + tok.Token}
		if st, _ := e.do(e.client(), "GET", "/api/v1/tasks", "", bearer); st != http.StatusOK {
			t.Fatalf("valid token: %d", st)
		}
		ts := listTokens(t, e, admin)
		if len(ts) != 1 || ts[0].LastUsedAt == nil || ts[0].Token != "" {
			t.Fatalf("list after use: %+v (want last_used_at set and no value)", ts)
		}
		page, _ := e.do(admin, "GET", "/tokens", "", nil)
		if page != http.StatusOK {
			t.Fatalf("tokens page: %d", page)
		}
		_, html := e.do(admin, "GET", "/tokens", "", nil)
		if !strings.Contains(html, exp.Format("2006-01-02 15:04")+" UTC") {
			t.Errorf("tokens page does not show the expiry")
		}

		// Let it expire (moved back in the database: no test waits hours).
		if _, err := ns.Store.DB.NewUpdate().Model((*store.APIToken)(nil)).Set("expires_at = ?", time.Now().Add(-time.Minute).UTC()).
			Where("id = ?", tok.ID).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		st, body = e.do(e.client(), "GET", "/api/v1/tasks", "", bearer)
		if st != http.StatusUnauthorized || !strings.Contains(body, "expired at") {
			t.Fatalf("expired token: %d %s, want 401 saying it expired", st, body)
		}
		_, html = e.do(admin, "GET", "/tokens", "", nil)
		if !strings.Contains(html, "expired") {
			t.Errorf("tokens page does not show the token as expired")
		}

		// The console form: a bad expiry is a 422 naming the field and stores nothing.
		resp := e.postForm(admin, "/tokens", map[string][]string{"name": {"form"}, "expires_at": {"not a time"}})
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("form with bad expiry: %d, want 422", resp.StatusCode)
		}
		resp = e.postForm(admin, "/tokens", map[string][]string{"name": {"form"}, "expires_at": {time.Now().Add(48 * time.Hour).UTC().Format("2006-01-02T15:04")}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("form with expiry: %d, want 200", resp.StatusCode)
		}
		ts = listTokens(t, e, admin)
		if len(ts) != 2 || ts[0].Name != "form" || ts[0].ExpiresAt == nil {
			t.Fatalf("after the form: %+v", ts)
		}
	})
}

// Creating and revoking a token are events naming the actor, never the value.
func TestTokenEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	st, body := e.do(admin, "POST", "/api/v1/tokens", `{"name":"deploy"}`, nil)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	tok := decode[apiTokenJSON](t, body)
	// The token revokes another token, acting as its owner.
	st2, body2 := e.do(admin, "POST", "/api/v1/tokens", `{"name":"other"}`, nil)
	if st2 != http.StatusCreated {
		t.Fatalf("create: %d %s", st2, body2)
	}
	other := decode[apiTokenJSON](t, body2)
	bearer := map[string]string{"Authorization": "Bearer " + tok.Token}
	if st, body := e.do(e.client(), "DELETE", "/api/v1/tokens/"+itoa(other.ID), "", bearer); st != http.StatusOK {
		t.Fatalf("revoke: %d %s", st, body)
	}
	if st, _ := e.do(e.client(), "DELETE", "/api/v1/tokens/"+itoa(other.ID), "", bearer); st != http.StatusConflict {
		t.Fatalf("revoke twice: %d, want 409", st)
	}
	if st, _ := e.do(e.client(), "DELETE", "/api/v1/tokens/999999", "", bearer); st != http.StatusNotFound {
		t.Fatalf("revoke unknown: %d, want 404", st)
	}
	evs, _, err := store.ListEvents(context.Background(), e.st.DB, store.EventFilter{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if strings.Contains(ev.Detail+ev.Target, tok.Token) || strings.Contains(ev.Detail+ev.Target, other.Token) {
			t.Errorf("event %s carries a token value", ev.Action)
		}
		if strings.HasPrefix(ev.Action, "token.") {
			got = append(got, ev.Actor+" "+ev.Action+" "+ev.Target)
		}
	}
	want := []string{
		"admin (token deploy) token.revoke " + itoa(other.ID) + " other",
		"admin token.create " + itoa(other.ID) + " other",
		"admin token.create " + itoa(tok.ID) + " deploy",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("token events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func listTokens(t *testing.T, e *env, c *http.Client) []apiTokenJSON {
	t.Helper()
	st, body := e.do(c, "GET", "/api/v1/tokens", "", nil)
	if st != http.StatusOK {
		t.Fatalf("list tokens: %d %s", st, body)
	}
	return decode[[]apiTokenJSON](t, body)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
