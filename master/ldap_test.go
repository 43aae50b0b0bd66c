package master_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/ldapauth"
	"github.com/schedulemaster-go/schedulemaster/ldapauth/ldaptest"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

const ldapIP = "192.0.2.10"

// ldapConfig is a directory of slapd s with memberOf groups.
func ldapConfig(s *ldaptest.Slapd) ldapauth.Config {
	return ldapauth.Config{
		URL: s.URL, BindDN: ldaptest.BindDN, BindPassword: ldaptest.BindPW, UserBase: ldaptest.People,
		AdminGroups: []string{ldaptest.AdminGroup}, ViewerGroups: []string{ldaptest.ViewGroup},
	}
}

// newLDAPEnv is a master over SQLite that signs in with cfg.
func newLDAPEnv(t *testing.T, cfg ldapauth.Config) *env {
	t.Helper()
	d, err := ldapauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, storetest.OpenSQLite(t), func(c *master.Config) { c.Directory = d })
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestLDAPLoginMapsGroupsToRoles(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	e := newLDAPEnv(t, ldapConfig(s))
	u, err := e.m.Accounts().Login(e.ctx, ldapIP, "alice", ldaptest.Password)
	if err != nil {
		t.Fatalf("alice: %v", err)
	}
	if u.Role != store.RoleAdmin || u.AuthMethod != master.MethodLDAP || u.PasswordHash != "" || u.Email != "alice@example.com" {
		t.Fatalf("alice = role %q method %q hash %q email %q; want admin, ldap, no hash, alice@example.com", u.Role, u.AuthMethod, u.PasswordHash, u.Email)
	}
	u, err = e.m.Accounts().Login(e.ctx, ldapIP, "bob", ldaptest.Password)
	if err != nil || u.Role != store.RoleViewer {
		t.Fatalf("bob = %+v, %v; want viewer", u, err)
	}
	// A second sign-in finds the user made just in time.
	if _, err := e.m.Accounts().Login(e.ctx, ldapIP, "bob", ldaptest.Password); err != nil {
		t.Fatalf("bob again: %v", err)
	}
	evs, _, err := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "user.login", Target: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Detail != "method ldap" || evs[0].Outcome != store.OutcomeOK {
		t.Fatalf("bob's user.login events = %+v; want 2 saying method ldap", evs)
	}
	// The role follows the groups on every sign-in: bob moved to the admins.
	u, err = e.m.Accounts().SignInExternal(e.ctx, master.ExternalIdentity{Method: master.MethodLDAP, Username: "bob", Groups: []string{ldaptest.AdminGroup}})
	if err != nil || u.Role != store.RoleAdmin {
		t.Fatalf("bob in the admin group = %+v, %v; want admin", u, err)
	}
	if got, _ := e.m.Accounts().GetUser(e.ctx, "bob"); got.Role != store.RoleAdmin {
		t.Fatalf("stored role of bob = %q, want admin", got.Role)
	}
	// A directory user has no local password: with LDAP unset the local check refuses it.
	plain := newEnv(t, e.s)
	if _, err := plain.m.Accounts().Login(e.ctx, ldapIP, "alice", ldaptest.Password); master.KindOf(err) != master.KindUnauthorized {
		t.Fatalf("alice without LDAP: %v, want unauthorized", err)
	}
}

func TestLDAPWrongPasswordIsThrottled(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	e := newLDAPEnv(t, ldapConfig(s))
	for i := range master.LoginLimitPerUser {
		_, err := e.m.Accounts().Login(e.ctx, ldapIP, "alice", "wrong-password-"+strings.Repeat("x", i))
		if master.KindOf(err) != master.KindUnauthorized || master.Message(err) != "wrong username or password" {
			t.Fatalf("attempt %d: %v; want wrong username or password", i+1, err)
		}
	}
	// The window is spent: even the right password is not checked now.
	_, err := e.m.Accounts().Login(e.ctx, ldapIP, "alice", ldaptest.Password)
	if master.KindOf(err) != master.KindLimited {
		t.Fatalf("after %d wrong passwords: %v; want too many failed logins", master.LoginLimitPerUser, err)
	}
	// Another address is not affected.
	if _, err := e.m.Accounts().Login(e.ctx, "192.0.2.11", "alice", ldaptest.Password); err != nil {
		t.Fatalf("alice from another address: %v", err)
	}
}

func TestLDAPUnknownUserNoGroupAndInjection(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	e := newLDAPEnv(t, ldapConfig(s))
	for _, name := range []string{"mallory", "*", "*)(uid=*", "alice)(|(uid=*", "ali*", "\x00alice"} {
		_, err := e.m.Accounts().Login(e.ctx, "192.0.2.20", name, ldaptest.Password)
		if master.KindOf(err) != master.KindUnauthorized || master.Message(err) != "wrong username or password" {
			t.Fatalf("user %q: %v; want wrong username or password", name, err)
		}
	}
	if n, err := store.CountUsers(e.ctx, e.s.Store.DB); err != nil || n != 1 {
		t.Fatalf("users = %d, %v; want only the first admin", n, err)
	}
	_, err := e.m.Accounts().Login(e.ctx, ldapIP, "carol", ldaptest.Password)
	if master.KindOf(err) != master.KindForbidden || !strings.Contains(master.Message(err), "carol is in no ldap group that grants a ScheduleMaster role") {
		t.Fatalf("carol (billing only): %v; want refused with a sentence about the groups", err)
	}
	if _, err := e.m.Accounts().GetUser(e.ctx, "carol"); !errors.Is(err, master.ErrNotFound) {
		t.Fatalf("carol was created (%v)", err)
	}
	// A right password with no role costs no attempt of the throttle.
	for range master.LoginLimitPerUser + 1 {
		if _, err := e.m.Accounts().Login(e.ctx, ldapIP, "carol", ldaptest.Password); master.KindOf(err) != master.KindForbidden {
			t.Fatalf("carol again: %v; want forbidden, not limited", err)
		}
	}
}

func TestLDAPLocalUsersFirstAndNameClash(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	e := newLDAPEnv(t, ldapConfig(s))
	const localPW = "local-admin-pw-1"
	if err := e.m.Accounts().ResetPassword(e.ctx, "admin", localPW); err != nil {
		t.Fatal(err)
	}
	// admin is local: its local password works, the directory's admin entry does not.
	if u, err := e.m.Accounts().Login(e.ctx, ldapIP, "admin", localPW); err != nil || u.AuthMethod != "" {
		t.Fatalf("local admin: %+v, %v", u, err)
	}
	if _, err := e.m.Accounts().Login(e.ctx, ldapIP, "admin", ldaptest.Password); master.KindOf(err) != master.KindUnauthorized {
		t.Fatalf("admin with the directory's password: %v; want wrong username or password", err)
	}
	_, err := e.m.Accounts().SignInExternal(e.ctx, master.ExternalIdentity{Method: master.MethodLDAP, Username: "admin", Groups: []string{ldaptest.AdminGroup}})
	if master.KindOf(err) != master.KindForbidden || !strings.Contains(master.Message(err), "a local user named admin already exists") {
		t.Fatalf("directory admin over local admin: %v; want refused", err)
	}
	// Names compare case-folded: a directory name that differs from a
	// local one only by case is refused at once, with the sentence, on
	// every attempt (it used to retry itself until its deadline).
	for _, name := range []string{"ADMIN", "Admin"} {
		start := time.Now()
		_, err := e.m.Accounts().SignInExternal(e.ctx, master.ExternalIdentity{Method: master.MethodLDAP, Username: name, Groups: []string{ldaptest.AdminGroup}})
		if master.KindOf(err) != master.KindForbidden || !strings.Contains(master.Message(err), "a local user named admin already exists") {
			t.Fatalf("directory %s over local admin: %v (after %s); want refused", name, err, time.Since(start))
		}
	}
	if u, err := e.m.Accounts().Login(e.ctx, ldapIP, "ADMIN", localPW); err != nil || u.Username != "admin" {
		t.Fatalf("local admin signing in as ADMIN: %+v, %v; want admin", u, err)
	}
	// A local user keeps working while the directory is down.
	s.Stop()
	if _, err := e.m.Accounts().Login(e.ctx, ldapIP, "admin", localPW); err != nil {
		t.Fatalf("local admin with LDAP down: %v", err)
	}
	// A name the local rules refuse is not created.
	_, err = e.m.Accounts().SignInExternal(e.ctx, master.ExternalIdentity{Method: master.MethodLDAP, Username: "a b", Groups: []string{ldaptest.AdminGroup}})
	if master.KindOf(err) != master.KindForbidden {
		t.Fatalf("name with a space: %v; want refused", err)
	}
}

func TestLDAPServerDownIsNotAWrongPassword(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	e := newLDAPEnv(t, ldapConfig(s))
	s.Stop()
	for range master.LoginLimitPerUser + 2 {
		_, err := e.m.Accounts().Login(e.ctx, ldapIP, "alice", ldaptest.Password)
		if master.KindOf(err) != master.KindUnavailable || !errors.Is(err, master.ErrDirectoryUnavailable) ||
			!strings.Contains(master.Message(err), "the LDAP directory cannot be reached") {
			t.Fatalf("LDAP down: %v; want unavailable, and not limited (no password was checked)", err)
		}
	}
}

func TestLDAPSAndStartTLSAndGroupSearch(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	cases := map[string]func(*ldapauth.Config){
		"ldaps":    func(c *ldapauth.Config) { c.URL, c.CAFile = s.LDAPSURL, s.CAFile },
		"starttls": func(c *ldapauth.Config) { c.StartTLS, c.CAFile = true, s.CAFile },
		"group search": func(c *ldapauth.Config) {
			c.GroupBase = ldaptest.Groups
		},
	}
	for name, edit := range cases {
		cfg := ldapConfig(s)
		edit(&cfg)
		e := newLDAPEnv(t, cfg)
		u, err := e.m.Accounts().Login(e.ctx, ldapIP, "alice", ldaptest.Password)
		if err != nil || u.Role != store.RoleAdmin {
			t.Fatalf("%s: alice = %+v, %v; want admin", name, u, err)
		}
		if _, err := e.m.Accounts().Login(e.ctx, ldapIP, "bob", ldaptest.Password); err != nil {
			t.Fatalf("%s: bob: %v", name, err)
		}
	}
	// An ldaps:// server whose certificate the system does not trust is unavailable, not a wrong password.
	cfg := ldapConfig(s)
	cfg.URL = s.LDAPSURL
	e := newLDAPEnv(t, cfg)
	if _, err := e.m.Accounts().Login(e.ctx, ldapIP, "alice", ldaptest.Password); !errors.Is(err, master.ErrDirectoryUnavailable) {
		t.Fatalf("untrusted certificate: %v; want unavailable", err)
	}
}

// TestLDAPProjectGroupsSetMemberships: a directory group mapped to a
// project role makes its member a member of that project at sign-in, with
// no cluster role; the membership follows the groups at every sign-in.
func TestLDAPProjectGroupsSetMemberships(t *testing.T) {
	t.Parallel()
	s := ldaptest.Start(t)
	cfg := ldapConfig(s)
	cfg.ProjectGroups = []master.GroupProject{{Group: ldaptest.OtherGroup, Project: "billing", Role: master.ProjectEditor}}
	e := newLDAPEnv(t, cfg)
	p, err := e.m.Projects().Create(e.ctx, master.ProjectInput{Name: "billing", Pools: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := e.m.Accounts().Login(e.ctx, ldapIP, "carol", ldaptest.Password)
	if err != nil {
		t.Fatalf("carol (in the billing group): %v", err)
	}
	if u.Role != store.RoleNone {
		t.Fatalf("carol's cluster role %q, want none", u.Role)
	}
	ms, err := store.MembershipsOf(e.ctx, e.s.Store.DB, "carol")
	if err != nil || ms[p.ID] != "editor" || len(ms) != 1 {
		t.Fatalf("carol's memberships %v %v, want editor of billing", ms, err)
	}
	// The groups change: the mapping decides again, replacing the membership.
	if _, err := e.m.Accounts().SignInExternal(e.ctx, master.ExternalIdentity{Method: master.MethodLDAP, Username: "carol",
		Groups: []string{ldaptest.ViewGroup}}); err != nil {
		t.Fatal(err)
	}
	if ms, _ := store.MembershipsOf(e.ctx, e.s.Store.DB, "carol"); len(ms) != 0 {
		t.Fatalf("carol left the billing group but is still a member: %v", ms)
	}
	if _, err := master.ParseGroupProjects("cn=x,dc=example=>Billing:editor"); err == nil {
		t.Fatal("a project name in capitals was accepted")
	}
	if _, err := master.ParseGroupProjects("cn=x,dc=example=>billing:boss"); err == nil {
		t.Fatal("an unknown role was accepted")
	}
}

// TestBreakGlassLimitsLocalPasswordsToAdmins: with local passwords limited
// to cluster admins, a local viewer with the right password is refused with
// a sentence, an admin signs in, and the event log says which way each
// tried.
func TestBreakGlassLimitsLocalPasswordsToAdmins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	if err := e.m.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]string{"root": store.RoleAdmin, "vic": store.RoleViewer} {
		hash, err := master.HashPassword("a long passphrase " + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.CreateUser(e.ctx, e.s.Store.DB, &store.User{Username: name, PasswordHash: hash, Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.m.Accounts().Login(e.ctx, "192.0.2.30", "vic", "a long passphrase vic"); err != nil {
		t.Fatalf("before the limit: %v", err)
	}
	st, _ := e.m.Settings()
	st.LocalAdminsOnly = true
	if err := e.m.UpdateSettings(e.ctx, st); err != nil {
		t.Fatal(err)
	}
	// The right password and a wrong one get the same answer: the refusal
	// confirms no password.
	_, err := e.m.Accounts().Login(e.ctx, "192.0.2.30", "vic", "a long passphrase vic")
	if master.KindOf(err) != master.KindUnauthorized || !strings.Contains(master.Message(err), "cluster admins only") {
		t.Fatalf("a local viewer under the limit: %v, want unauthorized with a sentence", err)
	}
	_, wrong := e.m.Accounts().Login(e.ctx, "192.0.2.32", "vic", "not vic's passphrase")
	if master.KindOf(wrong) != master.KindOf(err) || master.Message(wrong) != master.Message(err) {
		t.Fatalf("a right password answers %v, a wrong one %v: they differ", err, wrong)
	}
	if _, err := e.m.Accounts().Login(e.ctx, "192.0.2.31", "root", "a long passphrase root"); err != nil {
		t.Fatalf("a local admin under the limit (break glass): %v", err)
	}
	evs, _, err := store.ListEvents(e.ctx, e.s.Store.DB, store.EventFilter{Action: "user.login", Target: "vic"})
	if err != nil || len(evs) != 2 || evs[0].Outcome != store.OutcomeError || !strings.HasPrefix(evs[0].Detail, "method local") || evs[1].Outcome != store.OutcomeOK {
		t.Fatalf("vic's user.login events: %+v %v", evs, err)
	}
}
