package handlers_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/ldapauth"
	"github.com/schedulemaster-go/schedulemaster/ldapauth/ldaptest"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestLDAPLoginPage signs in through the login form against a real slapd:
// a directory user gets a session, a user in no mapped group reads why, and
// a directory that is down says so (503), never "wrong password".
func TestLDAPLoginPage(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	d, err := ldapauth.New(ldapauth.Config{URL: s.URL, BindDN: ldaptest.BindDN, BindPassword: ldaptest.BindPW,
		UserBase: ldaptest.People, AdminGroups: []string{ldaptest.AdminGroup}, ViewerGroups: []string{ldaptest.ViewGroup}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, storetest.OpenSQLite(t), func(c *master.Config) { c.Directory = d })
	c := e.login("bob", ldaptest.Password)
	if code, body := e.do(c, http.MethodGet, "/dashboard", "", nil); code != http.StatusOK || !strings.Contains(body, "bob") {
		t.Fatalf("bob's dashboard: %d", code)
	}
	page := func(user, pw string) (int, string) {
		resp := e.postForm(e.client(), "/login", url.Values{"username": {user}, "password": {pw}})
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, html.UnescapeString(string(b))
	}
	if code, body := page("carol", ldaptest.Password); code != http.StatusForbidden || !strings.Contains(body, "carol is in no ldap group that grants a ScheduleMaster role") {
		t.Fatalf("carol: %d, want 403 with the reason", code)
	}
	if code, body := page("bob", "wrong-password-1"); code != http.StatusUnauthorized || !strings.Contains(body, "Wrong username or password.") {
		t.Fatalf("bob with a wrong password: %d", code)
	}
	s.Stop()
	code, body := page("bob", ldaptest.Password)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "The sign-on directory (LDAP) cannot be reached") || strings.Contains(body, "Wrong username") {
		t.Fatalf("LDAP down: %d, want 503 saying the directory cannot be reached", code)
	}
	// The local admin still signs in.
	e.login("admin", "admin-password-1")
}
