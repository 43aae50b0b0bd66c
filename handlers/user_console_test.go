package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

func (e *env) userRow(name string) *store.User {
	e.t.Helper()
	u, err := store.GetUser(context.Background(), e.st.DB, name)
	if err != nil {
		e.t.Fatalf("get user %s: %v", name, err)
	}
	return u
}

func (e *env) usersCount() int {
	e.t.Helper()
	n, err := store.CountUsers(context.Background(), e.st.DB)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// get returns the status and body of a GET.
func (e *env) userGet(c *http.Client, path string) (int, string) {
	e.t.Helper()
	return e.do(c, "GET", path, "", nil)
}

// tryLogin reports the status of a login attempt with a fresh client.
func (e *env) userTryLogin(user, password string) int {
	e.t.Helper()
	return e.postForm(e.client(), "/login", url.Values{"username": {user}, "password": {password}}).StatusCode
}

func newUserForm(name, role, email, pw, confirm string) url.Values {
	return url.Values{"username": {name}, "role": {role}, "email": {email}, "password": {pw}, "password_confirm": {confirm}}
}

func TestUserCreateFormRefusesEveryBadField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	const pw = "a-good-password"
	cases := []struct {
		what  string
		form  url.Values
		field string
	}{
		{"no username", newUserForm("", "viewer", "", pw, pw), "username"},
		{"username with a space", newUserForm("bad name", "viewer", "", pw, pw), "username"},
		{"username with a slash", newUserForm("a/b", "viewer", "", pw, pw), "username"},
		{"username of 65 characters", newUserForm(strings.Repeat("u", 65), "viewer", "", pw, pw), "username"},
		{"username ..", newUserForm("..", "viewer", "", pw, pw), "username"},
		{"username taken", newUserForm("admin", "viewer", "", pw, pw), "username"},
		{"unknown role", newUserForm("dora", "root", "", pw, pw), "role"},
		{"no role", newUserForm("dora", "", "", pw, pw), "role"},
		{"bad email", newUserForm("dora", "viewer", "not-an-email", pw, pw), "email"},
		{"email with a display name", newUserForm("dora", "viewer", "Dora <dora@example.com>", pw, pw), "email"},
		{"short password", newUserForm("dora", "viewer", "", "short-pw", "short-pw"), "password"},
		{"no password", newUserForm("dora", "viewer", "", "", ""), "password"},
		{"password over 72 bytes", newUserForm("dora", "viewer", "", strings.Repeat("p", 73), strings.Repeat("p", 73)), "password"},
		{"confirmation differs", newUserForm("dora", "viewer", "", pw, pw+"x"), "password_confirm"},
	}
	for _, tc := range cases {
		resp := e.postForm(c, "/users", tc.form)
		b := body(t, resp)
		if resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422", tc.what, resp.StatusCode)
			continue
		}
		if !strings.Contains(b, `id="error-`+tc.field+`"`) {
			t.Errorf("%s: no inline error for %s in the answer", tc.what, tc.field)
		}
		if !strings.Contains(b, `id="create-user"`) || !strings.Contains(b, "was not created") {
			t.Errorf("%s: the answer is not the form again with a message", tc.what)
		}
		if n := e.usersCount(); n != 1 {
			t.Fatalf("%s: %d users, want 1 (nothing created)", tc.what, n)
		}
	}
	// Every field wrong at once: one message per field.
	resp := e.postForm(c, "/users", newUserForm("no good", "god", "x@", "short", "other"))
	b := body(t, resp)
	for _, f := range []string{"username", "role", "email", "password"} {
		if !strings.Contains(b, `id="error-`+f+`"`) {
			t.Errorf("all wrong: no inline error for %s", f)
		}
	}
	if !strings.Contains(b, `value="no good"`) {
		t.Error("all wrong: the typed username was not kept")
	}
	if strings.Contains(b, "short") {
		t.Error("all wrong: the typed password was echoed back")
	}

	resp = e.postForm(c, "/users", newUserForm(" dora ", "viewer", "dora@example.com", pw, pw))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/users" {
		t.Fatalf("create dora: %d %q, want 303 to /users", resp.StatusCode, resp.Header.Get("Location"))
	}
	u := e.userRow("dora")
	if u.Role != store.RoleViewer || u.Email != "dora@example.com" || u.Disabled {
		t.Fatalf("dora: %+v", u)
	}
	if cost, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil || cost != testPasswordCost {
		t.Fatalf("dora's password hash cost %d (%v), want the master's configured %d", cost, err, testPasswordCost)
	}
	status, page := e.userGet(c, "/users")
	if status != 200 || !strings.Contains(page, "User dora created") || !strings.Contains(page, `id="user-dora"`) {
		t.Fatalf("users page after create: %d, want the flash and dora's row", status)
	}
	if st := e.userTryLogin("dora", pw); st != http.StatusSeeOther {
		t.Fatalf("dora's login: %d, want 303", st)
	}
}

func TestUserViewerGets403OnEveryChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("vic", "viewer-password", store.RoleViewer)
	c := e.login("vic", "viewer-password")
	before := *e.userRow("admin")

	status, page := e.userGet(c, "/users")
	if status != 200 || !strings.Contains(page, `id="user-admin"`) || !strings.Contains(page, `id="user-vic"`) {
		t.Fatalf("viewer /users: %d, want the list", status)
	}
	for _, bad := range []string{`id="create-user"`, `id="user-form"`, `action="/users`, `hx-post="/users`, "data-action=", ">Create user<", ">Disable<", ">Enable<", ">Edit<"} {
		if strings.Contains(page, bad) {
			t.Errorf("viewer /users shows %s", bad)
		}
	}

	forms := map[string]url.Values{
		"/users":                newUserForm("mallory", "admin", "", "mallory-password", "mallory-password"),
		"/users/admin":          {"role": {"viewer"}, "email": {"x@example.com"}},
		"/users/admin/password": {"password": {"owned-password"}, "password_confirm": {"owned-password"}},
		"/users/admin/disable":  nil,
		"/users/vic/enable":     nil,
	}
	for path, form := range forms {
		resp := e.postForm(c, path, form)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d, want 403", path, resp.StatusCode)
		}
	}
	if st, _ := e.do(c, "POST", "/users/admin/disable", "", map[string]string{"HX-Request": "true"}); st != http.StatusForbidden {
		t.Errorf("viewer htmx disable: %d, want 403", st)
	}
	if st, _ := e.userGet(c, "/users/admin/edit"); st != http.StatusForbidden {
		t.Errorf("viewer GET /users/admin/edit: %d, want 403", st)
	}
	api := []struct{ method, path, body string }{
		{"POST", "/api/v1/users", `{"username":"mallory","password":"mallory-password","role":"admin"}`},
		{"PATCH", "/api/v1/users/admin", `{"role":"viewer"}`},
		{"PATCH", "/api/v1/users/admin", `{"disabled":true}`},
		{"PATCH", "/api/v1/users/admin", `{"password":"owned-password"}`},
		{"PATCH", "/api/v1/users/vic", `{"role":"admin"}`},
	}
	for _, a := range api {
		st, b := e.do(c, a.method, a.path, a.body, nil)
		if st != http.StatusForbidden || !strings.Contains(b, `"error"`) {
			t.Errorf("viewer %s %s: %d %s, want 403 with an error", a.method, a.path, st, b)
		}
	}
	// Reading is allowed.
	if st, b := e.userGet(c, "/api/v1/users"); st != 200 || !strings.Contains(b, `"username":"vic"`) {
		t.Errorf("viewer GET /api/v1/users: %d %s", st, b)
	}

	after := e.userRow("admin")
	if after.Role != before.Role || after.Disabled || after.PasswordHash != before.PasswordHash || after.Email != before.Email {
		t.Fatalf("admin changed by a viewer: %+v", after)
	}
	if v := e.userRow("vic"); v.Role != store.RoleViewer {
		t.Fatalf("vic promoted itself: %+v", v)
	}
	if n := e.usersCount(); n != 2 {
		t.Fatalf("%d users, want 2: a viewer created one", n)
	}
	// Still: a viewer changes its own account.
	if st, _ := e.userGet(c, "/account"); st != 200 {
		t.Fatalf("viewer /account: %d", st)
	}
	resp := e.postForm(c, "/account/email", url.Values{"email": {"vic@example.com"}})
	if resp.StatusCode != http.StatusSeeOther || e.userRow("vic").Email != "vic@example.com" {
		t.Fatalf("viewer sets own email: %d, %q", resp.StatusCode, e.userRow("vic").Email)
	}
}

func TestUserLastAdminIsProtected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("ops", "ops-password-1", store.RoleAdmin)
	e.addUser("vic", "viewer-password", store.RoleViewer)
	c := e.login("admin", "admin-password-1")

	// Disabling oneself is refused even with another admin around.
	resp := e.postForm(c, "/users/admin/disable", nil)
	if b := body(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(b, "cannot disable yourself") {
		t.Fatalf("disable self: %d, want 409 saying so", resp.StatusCode)
	}
	if st, b := e.do(c, "PATCH", "/api/v1/users/admin", `{"disabled":true}`, nil); st != http.StatusConflict || !strings.Contains(b, "cannot disable yourself") {
		t.Fatalf("API disable self: %d %s", st, b)
	}
	status, page := e.userGet(c, "/users")
	if status != 200 || strings.Contains(page, `data-action="disable" data-user="admin"`) {
		t.Fatal("the users page offers to disable oneself")
	}

	// With ops disabled, admin is the only enabled admin.
	resp = e.postForm(c, "/users/ops/disable", nil)
	if resp.StatusCode != http.StatusSeeOther || !e.userRow("ops").Disabled {
		t.Fatalf("disable ops: %d", resp.StatusCode)
	}
	resp = e.postForm(c, "/users/admin", url.Values{"role": {"viewer"}, "email": {"root@example.com"}})
	b := body(t, resp)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(b, `id="form-error"`) || !strings.Contains(b, "only enabled admin") {
		t.Fatalf("demote the last admin: %d, want 409 with the reason in the form", resp.StatusCode)
	}
	if st, b := e.do(c, "PATCH", "/api/v1/users/admin", `{"email":"root@example.com","role":"viewer"}`, nil); st != http.StatusConflict || !strings.Contains(b, "only enabled admin") {
		t.Fatalf("API demote the last admin: %d %s", st, b)
	}
	if u := e.userRow("admin"); u.Role != store.RoleAdmin || u.Email != "" {
		t.Fatalf("admin after refused changes: %+v (nothing, not even the email, may change)", u)
	}
	status, page = e.userGet(c, "/users/admin/edit")
	if status != 200 || !strings.Contains(page, `id="only-admin"`) {
		t.Fatalf("edit page of the only admin: %d, want the hint", status)
	}

	// Enabling ops again lifts the protection; admin may step down.
	if st, _ := e.do(c, "POST", "/users/ops/enable", "", map[string]string{"HX-Request": "true"}); st != 200 {
		t.Fatalf("htmx enable ops: %d", st)
	}
	if e.userRow("ops").Disabled {
		t.Fatal("ops still disabled")
	}
	status, page = e.userGet(c, "/users")
	if !strings.Contains(page, "User ops enabled") {
		t.Fatalf("users page after htmx enable: %d, want the flash", status)
	}
	resp = e.postForm(c, "/users/admin", url.Values{"role": {"viewer"}, "email": {"root@example.com"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin steps down: %d", resp.StatusCode)
	}
	if u := e.userRow("admin"); u.Role != store.RoleViewer || u.Email != "root@example.com" {
		t.Fatalf("admin after stepping down: %+v", u)
	}
	// The role change ended admin's session; logged in again as a viewer,
	// admin may change nothing.
	if resp := e.postForm(c, "/users/vic/disable", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fusers%2Fvic%2Fdisable" {
		t.Fatalf("demoted admin's old session: %d %q, want 303 to the login", resp.StatusCode, resp.Header.Get("Location"))
	}
	c = e.login("admin", "admin-password-1")
	if resp := e.postForm(c, "/users/vic/disable", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("demoted admin disables vic: %d, want 403", resp.StatusCode)
	}

	// ops is the last admin: it can neither disable nor demote itself.
	o := e.login("ops", "ops-password-1")
	resp = e.postForm(c, "/users/ops/disable", nil) // as the demoted admin: 403 first
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer disables ops: %d", resp.StatusCode)
	}
	st, hdr := func() (int, http.Header) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/users/ops/disable", nil)
		req.Header.Set("HX-Request", "true")
		r, err := o.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode, r.Header
	}()
	if st != 200 || hdr.Get("HX-Redirect") != "/users" {
		t.Fatalf("htmx disable self: %d %v", st, hdr)
	}
	if _, page := e.userGet(o, "/users"); !strings.Contains(page, "cannot disable yourself") {
		t.Fatal("htmx disable self: no error flash on the users page")
	}
	if st, b := e.do(o, "PATCH", "/api/v1/users/ops", `{"role":"viewer"}`, nil); st != http.StatusConflict || !strings.Contains(b, "only enabled admin") {
		t.Fatalf("API: the last admin demotes itself: %d %s", st, b)
	}
	if n, _ := store.CountActiveAdmins(context.Background(), e.st.DB); n != 1 {
		t.Fatalf("%d enabled admins, want 1", n)
	}
}

func TestUserChangesOwnPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("vic", "viewer-password", store.RoleViewer)
	c := e.login("vic", "viewer-password")

	status, page := e.userGet(c, "/account")
	if status != 200 || !strings.Contains(page, `id="account-username">vic<`) || !strings.Contains(page, `id="change-password"`) {
		t.Fatalf("/account: %d", status)
	}
	bad := []struct {
		what                  string
		current, next, repeat string
		field                 string
	}{
		{"wrong current password", "not-my-password", "brand-new-password", "brand-new-password", "current_password"},
		{"no current password", "", "brand-new-password", "brand-new-password", "current_password"},
		{"short new password", "viewer-password", "short", "short", "new_password"},
		{"same as the current one", "viewer-password", "viewer-password", "viewer-password", "new_password"},
		{"confirmation differs", "viewer-password", "brand-new-password", "brand-new-passwordX", "new_password_confirm"},
	}
	hash := e.userRow("vic").PasswordHash
	for _, tc := range bad {
		resp := e.postForm(c, "/account/password", url.Values{"current_password": {tc.current}, "new_password": {tc.next}, "new_password_confirm": {tc.repeat}})
		b := body(t, resp)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-`+tc.field+`"`) {
			t.Errorf("%s: %d, want 422 with #error-%s", tc.what, resp.StatusCode, tc.field)
		}
		if e.userRow("vic").PasswordHash != hash {
			t.Fatalf("%s: the password changed", tc.what)
		}
	}

	resp := e.postForm(c, "/account/password", url.Values{"current_password": {"viewer-password"}, "new_password": {"brand-new-password"}, "new_password_confirm": {"brand-new-password"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account" {
		t.Fatalf("change password: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page := e.userGet(c, "/account"); !strings.Contains(page, "Your password was changed") {
		t.Fatal("no success flash after the change")
	}
	if cost, _ := bcrypt.Cost([]byte(e.userRow("vic").PasswordHash)); cost != testPasswordCost {
		t.Fatalf("new hash cost %d, want the master's configured %d", cost, testPasswordCost)
	}
	if st := e.userTryLogin("vic", "viewer-password"); st != http.StatusUnauthorized {
		t.Fatalf("login with the old password: %d, want 401", st)
	}
	if st := e.userTryLogin("vic", "brand-new-password"); st != http.StatusSeeOther {
		t.Fatalf("login with the new password: %d, want 303", st)
	}

	// Email: refused inline when invalid, cleared with "".
	resp = e.postForm(c, "/account/email", url.Values{"email": {"vic at example"}})
	if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-email"`) {
		t.Fatalf("bad email: %d", resp.StatusCode)
	}
	if e.userRow("vic").Email != "" {
		t.Fatal("a bad email was stored")
	}
	if resp := e.postForm(c, "/account/email", url.Values{"email": {"vic@example.com"}}); resp.StatusCode != http.StatusSeeOther || e.userRow("vic").Email != "vic@example.com" {
		t.Fatalf("set email: %d", resp.StatusCode)
	}
	if resp := e.postForm(c, "/account/email", url.Values{"email": {""}}); resp.StatusCode != http.StatusSeeOther || e.userRow("vic").Email != "" {
		t.Fatalf("clear email: %d", resp.StatusCode)
	}
}

func TestUserAdminResetsPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("vic", "viewer-password", store.RoleViewer)
	c := e.login("admin", "admin-password-1")
	resp := e.postForm(c, "/users/vic/password", url.Values{"password": {"short"}, "password_confirm": {"short"}})
	if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-password"`) {
		t.Fatalf("short reset: %d", resp.StatusCode)
	}
	resp = e.postForm(c, "/users/vic/password", url.Values{"password": {"reset-password-1"}, "password_confirm": {"reset-password-2"}})
	if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-password_confirm"`) {
		t.Fatalf("mismatched reset: %d", resp.StatusCode)
	}
	if st := e.userTryLogin("vic", "viewer-password"); st != http.StatusSeeOther {
		t.Fatal("a refused reset changed the password")
	}
	resp = e.postForm(c, "/users/vic/password", url.Values{"password": {"reset-password-1"}, "password_confirm": {"reset-password-1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	if st := e.userTryLogin("vic", "reset-password-1"); st != http.StatusSeeOther {
		t.Fatalf("login with the reset password: %d", st)
	}
	if resp := e.postForm(c, "/users/nobody/password", url.Values{"password": {"reset-password-1"}, "password_confirm": {"reset-password-1"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("reset of an unknown user: %d, want 404", resp.StatusCode)
	}
	if resp := e.postForm(c, "/users/nobody/disable", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("disable an unknown user: %d, want 404", resp.StatusCode)
	}
	// The edit page: role and email with inline errors.
	resp = e.postForm(c, "/users/vic", url.Values{"role": {"superuser"}, "email": {"nope"}})
	if b := body(t, resp); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(b, `id="error-role"`) || !strings.Contains(b, `id="error-email"`) {
		t.Fatalf("bad edit: %d", resp.StatusCode)
	}
	resp = e.postForm(c, "/users/vic", url.Values{"role": {"admin"}, "email": {"vic@example.com"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", resp.StatusCode)
	}
	if u := e.userRow("vic"); u.Role != store.RoleAdmin || u.Email != "vic@example.com" {
		t.Fatalf("vic after edit: %+v", u)
	}
}

func TestUserDisabledSessionIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	e.addUser("vic", "viewer-password", store.RoleViewer)
	v := e.login("vic", "viewer-password")
	if st, _ := e.userGet(v, "/nodes"); st != 200 {
		t.Fatalf("vic /nodes: %d", st)
	}
	a := e.login("admin", "admin-password-1")
	if resp := e.postForm(a, "/users/vic/disable", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable vic: %d", resp.StatusCode)
	}
	st, _ := e.userGet(v, "/nodes")
	if st != http.StatusSeeOther {
		t.Fatalf("vic's session after disable: /nodes %d, want 303 to the login", st)
	}
	if st, _ := e.userGet(v, "/api/v1/users"); st != http.StatusUnauthorized {
		t.Fatalf("vic's session after disable: API %d, want 401", st)
	}
	if st := e.userTryLogin("vic", "viewer-password"); st != http.StatusUnauthorized {
		t.Fatalf("disabled vic logs in: %d, want 401", st)
	}
	if resp := e.postForm(a, "/users/vic/enable", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("enable vic: %d", resp.StatusCode)
	}
	if st := e.userTryLogin("vic", "viewer-password"); st != http.StatusSeeOther {
		t.Fatalf("enabled vic logs in: %d, want 303", st)
	}
}

func TestUserAPI(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, ns storetest.NamedStore) {
		e := newEnv(t, ns)
		c := e.login("admin", "admin-password-1")

		st, b := e.userGet(c, "/api/v1/users")
		if st != 200 || strings.Contains(b, "password") {
			t.Fatalf("list: %d %s", st, b)
		}
		list := decode[[]map[string]any](t, b)
		if len(list) != 1 || list[0]["username"] != "admin" || list[0]["role"] != "admin" || list[0]["disabled"] != false || list[0]["email"] != "" || list[0]["created_at"] == nil {
			t.Fatalf("list: %s", b)
		}

		st, b = e.do(c, "POST", "/api/v1/users", `{"username":"ci","password":"ci-password-1","email":"ci@example.com"}`, nil)
		if st != http.StatusCreated {
			t.Fatalf("create: %d %s", st, b)
		}
		created := decode[map[string]any](t, b)
		if created["username"] != "ci" || created["role"] != "viewer" || created["email"] != "ci@example.com" {
			t.Fatalf("created: %s (role defaults to viewer)", b)
		}
		if st := e.userTryLogin("ci", "ci-password-1"); st != http.StatusSeeOther {
			t.Fatalf("ci logs in: %d", st)
		}

		bad := []struct{ body, field string }{
			{`{"username":"bad name","password":"ci-password-1"}`, "username"},
			{`{"username":"x","password":"short"}`, "password"},
			{`{"username":"x","password":"ci-password-1","role":"owner"}`, "role"},
			{`{"username":"x","password":"ci-password-1","email":"@"}`, "email"},
		}
		for _, tc := range bad {
			st, b := e.do(c, "POST", "/api/v1/users", tc.body, nil)
			if st != http.StatusBadRequest {
				t.Errorf("create %s: %d, want 400", tc.body, st)
				continue
			}
			r := decode[struct {
				Error  string            `json:"error"`
				Fields map[string]string `json:"fields"`
			}](t, b)
			if r.Error == "" || r.Fields[tc.field] == "" {
				t.Errorf("create %s: %s, want an error and fields.%s", tc.body, b, tc.field)
			}
		}
		if st, b := e.do(c, "POST", "/api/v1/users", `{"username":"ci","password":"ci-password-1"}`, nil); st != http.StatusConflict || !strings.Contains(b, "already exists") {
			t.Errorf("duplicate: %d %s", st, b)
		}
		if st, _ := e.do(c, "POST", "/api/v1/users", `{"username":"y","password":"ci-password-1","admin":true}`, nil); st != http.StatusBadRequest {
			t.Errorf("unknown field: %d, want 400", st)
		}
		if n := e.usersCount(); n != 2 {
			t.Fatalf("%d users after refused creates, want 2", n)
		}

		st, b = e.do(c, "PATCH", "/api/v1/users/ci", `{"role":"admin","email":"","password":"ci-password-2"}`, nil)
		if st != 200 {
			t.Fatalf("patch: %d %s", st, b)
		}
		if u := e.userRow("ci"); u.Role != store.RoleAdmin || u.Email != "" || u.Disabled {
			t.Fatalf("ci after patch: %+v", u)
		}
		if st := e.userTryLogin("ci", "ci-password-2"); st != http.StatusSeeOther {
			t.Fatalf("ci with the patched password: %d", st)
		}
		st, b = e.do(c, "PATCH", "/api/v1/users/ci", `{"disabled":true}`, nil)
		if st != 200 || decode[map[string]any](t, b)["disabled"] != true {
			t.Fatalf("patch disabled: %d %s", st, b)
		}
		for _, tc := range []struct {
			path, body string
			status     int
		}{
			{"/api/v1/users/nobody", `{"role":"viewer"}`, http.StatusNotFound},
			{"/api/v1/users/ci", `{}`, http.StatusBadRequest},
			{"/api/v1/users/ci", `{"role":"root"}`, http.StatusBadRequest},
			{"/api/v1/users/ci", `{"password":"short"}`, http.StatusBadRequest},
			{"/api/v1/users/ci", `{"email":"nope"}`, http.StatusBadRequest},
			{"/api/v1/users/ci", `{"disabled":"yes"}`, http.StatusBadRequest},
			{"/api/v1/users/ci", `{"name":"x"}`, http.StatusBadRequest},
		} {
			st, b := e.do(c, "PATCH", tc.path, tc.body, nil)
			if st != tc.status || !strings.Contains(b, `"error"`) {
				t.Errorf("PATCH %s %s: %d %s, want %d with an error", tc.path, tc.body, st, b, tc.status)
			}
		}
		if st, _ := e.userGet(c, "/api/v1/users/nobody"); st != http.StatusNotFound {
			t.Errorf("GET unknown user: %d", st)
		}
		if st, b := e.userGet(c, "/api/v1/users/ci"); st != 200 || !strings.Contains(b, `"disabled":true`) {
			t.Errorf("GET ci: %d %s", st, b)
		}

		// An API token acts as admin.
		plain, hash, err := store.NewTokenValue()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.CreateToken(context.Background(), e.st.DB, &store.APIToken{Name: "ci", TokenHash: hash, CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		tok := map[string]string{"Authorization": "Bearer " + plain}
		if st, b := e.do(e.client(), "PATCH", "/api/v1/users/ci", `{"disabled":false}`, tok); st != 200 {
			t.Fatalf("token patch: %d %s", st, b)
		}
		if st, _ := e.do(e.client(), "GET", "/api/v1/users", "", nil); st != http.StatusUnauthorized {
			t.Fatalf("anonymous list: %d, want 401", st)
		}
	})
}

func TestUserListPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	for i := 0; i < 54; i++ {
		e.addUser(fmt.Sprintf("u%02d", i), "some-password", store.RoleViewer)
	}
	c := e.login("admin", "admin-password-1")
	st, page := e.userGet(c, "/users")
	if st != 200 || strings.Count(page, `<tr id="user-`) != 50 || !strings.Contains(page, `id="users-next"`) || strings.Contains(page, `id="users-prev"`) {
		t.Fatalf("page 1: %d, %d rows", st, strings.Count(page, `<tr id="user-`))
	}
	if !strings.Contains(page, "1–50 of 55") {
		t.Fatal("page 1: no range 1–50 of 55")
	}
	st, page = e.userGet(c, "/users?offset=50")
	if st != 200 || strings.Count(page, `<tr id="user-`) != 5 || strings.Contains(page, `id="users-next"`) || !strings.Contains(page, `id="users-prev"`) {
		t.Fatalf("page 2: %d, %d rows", st, strings.Count(page, `<tr id="user-`))
	}
	st, page = e.userGet(c, "/users?offset=500")
	if st != 200 || !strings.Contains(page, "No users on this page") {
		t.Fatalf("past the end: %d", st)
	}
	for _, bad := range []string{"<script>", "style="} {
		if strings.Contains(page, bad) {
			t.Errorf("users page has inline %s", bad)
		}
	}
}

func TestUserActionsReachTheEventLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	c := e.login("admin", "admin-password-1")
	if resp := e.postForm(c, "/users", newUserForm("dora", "viewer", "", "dora-password", "dora-password")); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create dora: %d", resp.StatusCode)
	}
	if resp := e.postForm(c, "/users/dora/disable", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable dora: %d", resp.StatusCode)
	}
	if resp := e.postForm(c, "/users/admin/disable", nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("disable self: %d", resp.StatusCode)
	}
	if st, b := e.do(c, "PATCH", "/api/v1/users/dora", `{"password":"secret-password-9","disabled":false}`, nil); st != 200 {
		t.Fatalf("patch dora: %d %s", st, b)
	}
	evs, _, err := store.ListEvents(context.Background(), e.st.DB, store.EventFilter{TargetType: store.TargetUser, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s %s %s %s", ev.Actor, ev.Action, ev.Target, ev.Outcome))
		if strings.Contains(ev.Detail, "secret-password") {
			t.Errorf("a password reached the event log: %+v", ev)
		}
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"admin user.create dora ok", "admin user.disable dora ok", "admin user.disable admin error", "admin user.update dora ok"} {
		if !strings.Contains(all, want) {
			t.Errorf("event log lacks %q; has:\n%s", want, all)
		}
	}
}
