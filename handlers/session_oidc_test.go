package handlers_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

const (
	oidcClientID     = "schedulemaster"
	oidcClientSecret = "oidc-client-secret-0123456789"
	oidcPassword     = "verysecure"
)

// oidcUsers is the provider's directory: id -> user.
type oidcUsers map[string]*storage.User

func (u oidcUsers) GetUserByID(id string) *storage.User { return u[id] }
func (u oidcUsers) GetUserByUsername(name string) *storage.User {
	for _, x := range u {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u oidcUsers) ExampleClientID() string { return storage.ServiceUserID }

// testOP is zitadel's example provider storage with groups in the ID token
// and switches that make it misbehave.
type testOP struct {
	*storage.Storage
	mu         sync.Mutex
	groups     map[string][]string // user id -> groups
	wrongNonce atomic.Bool
}

// SetUserinfoFromRequest puts username, email and groups into the ID token,
// as Keycloak and Dex do.
func (s *testOP) SetUserinfoFromRequest(ctx context.Context, ui *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, token, append(scopes, oidc.ScopeProfile, oidc.ScopeEmail)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ui.AppendClaims("groups", s.groups[token.GetSubject()])
	return nil
}

// CreateAuthRequest swaps the nonce when told to: a token for another sign-in.
func (s *testOP) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	if s.wrongNonce.Load() {
		req.Nonce = "a-nonce-of-another-sign-in"
	}
	return s.Storage.CreateAuthRequest(ctx, req, userID)
}

func (s *testOP) setGroups(userID string, groups ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[userID] = groups
}

// oidcEnv is a master with OIDC sign-on and a real provider, both on loopback.
type oidcEnv struct {
	*env
	op     *testOP
	opURL  string
	tamper atomic.Bool // the provider's token answer gets a changed ID token
}

func newOIDCEnv(t *testing.T, edit func(*handlers.OIDCConfig)) *oidcEnv {
	t.Helper()
	return newOIDCEnvOn(t, storetest.OpenSQLite(t), edit)
}

// newOIDCEnvOn is newOIDCEnv on the store given.
func newOIDCEnvOn(t *testing.T, ns storetest.NamedStore, edit func(*handlers.OIDCConfig)) *oidcEnv {
	t.Helper()
	ctx := storetest.Ctx(t)
	log := storetest.Logger(t)
	oe := &oidcEnv{}

	var opHandler, smHandler http.Handler
	opSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" && oe.tamper.Load() {
			rec := httptest.NewRecorder()
			opHandler.ServeHTTP(rec, r)
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err == nil {
				if raw, ok := body["id_token"].(string); ok {
					body["id_token"] = tamperJWT(t, raw)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
			return
		}
		opHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(opSrv.Close)
	smSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { smHandler.ServeHTTP(w, r) }))
	t.Cleanup(smSrv.Close)

	users := oidcUsers{}
	for _, name := range []string{"alice", "bob", "carol", "dave", "eve@example.com"} {
		users["id-"+name] = &storage.User{ID: "id-" + name, Username: name, Password: oidcPassword,
			Email: strings.TrimSuffix(name, "@example.com") + "@example.com", EmailVerified: true}
	}
	st := storage.NewStorageWithClients(users, map[string]*storage.Client{
		oidcClientID: storage.WebClient(oidcClientID, oidcClientSecret, smSrv.URL+handlers.PathOIDCCallback),
	})
	oe.op = &testOP{Storage: st, groups: map[string][]string{}}
	oe.opURL = opSrv.URL
	opHandler = exampleop.SetupServer(opSrv.URL, oe.op, nil, false)

	m := master.New(master.Config{PasswordCost: testPasswordCost, Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: 500 * time.Millisecond, MaxFailures: 3},
		OIDC: &master.GroupRoles{Admin: []string{"sm-admins"}, Viewer: []string{"sm-viewers", "ops"},
			Projects: []master.GroupProject{{Group: "billing-devs", Project: "billing", Role: master.ProjectEditor}}}}, ns.Store, log)
	t.Cleanup(func() { m.Stop(context.Background()) })
	cfg := &handlers.OIDCConfig{Issuer: opSrv.URL, ClientID: oidcClientID, ClientSecret: oidcClientSecret,
		RedirectURL: smSrv.URL + handlers.PathOIDCCallback, DisplayName: "Test IdP",
		Scopes: []string{"openid", "profile", "email"}, UsernameClaim: "preferred_username", GroupsClaim: "groups"}
	if edit != nil {
		edit(cfg)
	}
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log, OIDC: cfg})
	if err != nil {
		t.Fatal(err)
	}
	smHandler = h
	oe.env = &env{t: t, st: ns.Store, m: m, srv: smSrv}
	oe.addUser("admin", "admin-password-1", store.RoleAdmin)
	return oe
}

// tamperJWT changes the payload of a signed token and keeps its signature.
func tamperJWT(t *testing.T, raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Errorf("ID token has %d parts", len(parts))
		return raw
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Errorf("ID token payload: %v", err)
		return raw
	}
	changed := strings.Replace(string(payload), `"sm-viewers"`, `"sm-admins"`, 1)
	if changed == string(payload) {
		t.Errorf("nothing to tamper with in %s", payload)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(changed))
	return strings.Join(parts, ".")
}

// get fetches u with c and returns status, Location resolved, and body.
func (oe *oidcEnv) get(c *http.Client, u string) (int, string, string) {
	oe.t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		oe.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	loc := ""
	if l, err := resp.Location(); err == nil {
		loc = l.String()
	}
	return resp.StatusCode, loc, string(b)
}

// toCallback starts a sign-in in browser c, signs in at the provider as
// user and returns the callback URL the provider sends the browser to.
func (oe *oidcEnv) toCallback(c *http.Client, user string) string {
	oe.t.Helper()
	code, loc, _ := oe.get(c, oe.srv.URL+"/login/oidc?next=/tasks")
	if code != http.StatusFound || !strings.HasPrefix(loc, oe.opURL) {
		oe.t.Fatalf("start: status %d to %q, want 302 to the provider", code, loc)
	}
	for range 10 {
		code, next, body := oe.get(c, loc)
		switch {
		case strings.HasPrefix(next, oe.srv.URL+handlers.PathOIDCCallback):
			return next
		case code == http.StatusFound || code == http.StatusSeeOther:
			loc = next
		case code == http.StatusOK && strings.Contains(body, "password"):
			u, _ := url.Parse(loc)
			resp, err := c.PostForm(oe.opURL+"/login/username", url.Values{"username": {user},
				"password": {oidcPassword}, "id": {u.Query().Get("authRequestID")}})
			if err != nil {
				oe.t.Fatal(err)
			}
			resp.Body.Close()
			l, err := resp.Location()
			if err != nil {
				oe.t.Fatalf("provider login: status %d, no redirect", resp.StatusCode)
			}
			loc = l.String()
		default:
			oe.t.Fatalf("provider: status %d at %s: %.300s", code, loc, body)
		}
	}
	oe.t.Fatal("the provider never sent the browser back")
	return ""
}

// signIn runs the whole flow and returns the master's answer to the callback.
func (oe *oidcEnv) signIn(c *http.Client, user string) (int, string, string) {
	oe.t.Helper()
	return oe.get(c, oe.toCallback(c, user))
}

func (oe *oidcEnv) user(name string) *store.User {
	oe.t.Helper()
	u, err := store.GetUser(context.Background(), oe.st.DB, name)
	if err != nil {
		oe.t.Fatalf("user %s: %v", name, err)
	}
	return u
}

func (oe *oidcEnv) noUser(name string) {
	oe.t.Helper()
	if _, err := store.GetUser(context.Background(), oe.st.DB, name); err == nil {
		oe.t.Fatalf("user %s was created", name)
	}
}

// signedIn reports whether c has a working session.
func (oe *oidcEnv) signedIn(c *http.Client) bool {
	oe.t.Helper()
	code, _, _ := oe.get(c, oe.srv.URL+"/dashboard")
	return code == http.StatusOK
}

func TestOIDCCodeFlowSignsInWithRoleFromGroups(t *testing.T) {
	t.Parallel()
	storetest.Run(t, testOIDCCodeFlow)
}

func testOIDCCodeFlow(t *testing.T, ns storetest.NamedStore) {
	oe := newOIDCEnvOn(t, ns, nil)
	oe.op.setGroups("id-alice", "staff", "sm-admins")

	c := oe.client()
	code, _, body := oe.get(c, oe.srv.URL+"/login?next=/tasks")
	if code != http.StatusOK || !strings.Contains(body, "Sign in with Test IdP") || !strings.Contains(body, `href="/login/oidc?next=%2Ftasks"`) {
		t.Fatalf("login page: status %d, no sign-in button: %.2000s", code, body)
	}
	code, loc, _ := oe.signIn(c, "alice")
	if code != http.StatusSeeOther || loc != oe.srv.URL+"/tasks" {
		t.Fatalf("callback: status %d to %q, want 303 to /tasks", code, loc)
	}
	if !oe.signedIn(c) {
		t.Fatal("no session after the callback")
	}
	u := oe.user("alice")
	if u.Role != store.RoleAdmin || u.AuthMethod != "oidc" || u.ExternalSubject != "id-alice" || u.PasswordHash != "" || u.Email != "alice@example.com" {
		t.Fatalf("alice: %+v", u)
	}
	var evs []store.Event
	if err := oe.st.DB.NewSelect().Model(&evs).Where("action = ?", "user.login").Where("target = ?", "alice").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Detail != "method oidc" || evs[0].Outcome != store.OutcomeOK {
		t.Fatalf("login events: %+v", evs)
	}
	// An OIDC user has no password here.
	resp := oe.postForm(oe.client(), "/login", url.Values{"username": {"alice"}, "password": {oidcPassword}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("password login of an OIDC user: status %d, want 401", resp.StatusCode)
	}

	// The name stays bound to the provider's subject.
	other := master.ExternalIdentity{Method: master.MethodOIDC, Subject: "someone-else", Username: "alice", Groups: []string{"sm-admins"}}
	if _, err := oe.m.Accounts().SignInExternal(context.Background(), other); master.KindOf(err) != master.KindForbidden {
		t.Fatalf("another subject as alice: %v, want a KindForbidden refusal", err)
	}
	// Nor can an admin give them one.
	if err := oe.m.Accounts().ResetPassword(context.Background(), "alice", "a-local-password-1"); master.KindOf(err) != master.KindState {
		t.Fatalf("password for an OIDC user: %v, want a KindState refusal", err)
	}

	// The role follows the groups at every sign-in.
	oe.op.setGroups("id-alice", "ops")
	c2 := oe.client()
	if code, _, _ := oe.signIn(c2, "alice"); code != http.StatusSeeOther {
		t.Fatalf("second sign-in: status %d", code)
	}
	if u := oe.user("alice"); u.Role != store.RoleViewer {
		t.Fatalf("alice after leaving sm-admins: role %s, want viewer", u.Role)
	}
	if oe.signedIn(c) {
		t.Fatal("the admin session outlived the role change")
	}
	// Logout ends the local session.
	if !oe.signedIn(c2) {
		t.Fatal("no session after the second sign-in")
	}
	if resp := oe.postForm(c2, "/logout", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: status %d", resp.StatusCode)
	}
	if oe.signedIn(c2) {
		t.Fatal("still signed in after logout")
	}
}

// TestOIDCProjectGroupsGrantProjectRoles: a provider group mapped to a
// project role signs its member in with no cluster role, as an editor of
// that project only: the project's page opens, another's is missing, and
// leaving the group ends the membership at the next sign-in.
func TestOIDCProjectGroupsGrantProjectRoles(t *testing.T) {
	t.Parallel()
	oe := newOIDCEnv(t, nil)
	ctx := context.Background()
	if _, err := oe.m.Projects().Create(ctx, master.ProjectInput{Name: "billing", Pools: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	oe.op.setGroups("id-dave", "billing-devs")
	c := oe.client()
	if code, _, body := oe.signIn(c, "dave"); code != http.StatusSeeOther {
		t.Fatalf("dave's sign-in: %d %.500s", code, body)
	}
	if u := oe.user("dave"); u.Role != store.RoleNone {
		t.Fatalf("dave's cluster role %q, want none", u.Role)
	}
	if code, _, body := oe.get(c, oe.srv.URL+"/projects/billing"); code != http.StatusOK || !strings.Contains(body, "editor") {
		t.Fatalf("dave's project page: %d", code)
	}
	if code, _, _ := oe.get(c, oe.srv.URL+"/projects/default"); code != http.StatusNotFound {
		t.Fatalf("another project's page: %d, want 404", code)
	}
	if code, _, _ := oe.get(c, oe.srv.URL+"/tasks/new?project=billing"); code != http.StatusOK {
		t.Fatalf("the new-task form of billing for its editor: %d", code)
	}
	oe.op.setGroups("id-dave", "billing-devs-alumni")
	if code, _, _ := oe.signIn(oe.client(), "dave"); code == http.StatusSeeOther {
		t.Fatal("dave signed in with no mapped group left")
	}
	if ms, _ := store.MembershipsOf(ctx, oe.st.DB, "dave"); len(ms) != 1 {
		t.Fatalf("a refused sign-in changed dave's memberships: %v", ms)
	}
	oe.op.setGroups("id-dave", "ops")
	if code, _, _ := oe.signIn(oe.client(), "dave"); code != http.StatusSeeOther {
		t.Fatal("dave as a viewer of every project")
	}
	if ms, _ := store.MembershipsOf(ctx, oe.st.DB, "dave"); len(ms) != 0 {
		t.Fatalf("dave left billing-devs but is still a member: %v", ms)
	}
}

func TestOIDCRefusesWrongState(t *testing.T) {
	t.Parallel()
	oe := newOIDCEnv(t, nil)
	oe.op.setGroups("id-bob", "sm-viewers")

	c := oe.client()
	cb, _ := url.Parse(oe.toCallback(c, "bob"))
	q := cb.Query()
	q.Set("state", strings.Repeat("0", 64))
	cb.RawQuery = q.Encode()
	code, _, body := oe.get(c, cb.String())
	if code != http.StatusBadRequest || !strings.Contains(body, "not started in this browser") {
		t.Fatalf("wrong state: status %d: %.500s", code, body)
	}
	// The right callback in another browser (no flow cookie) is refused too.
	cb2 := oe.toCallback(oe.client(), "bob")
	if code, _, _ := oe.get(oe.client(), cb2); code != http.StatusBadRequest {
		t.Fatalf("callback in another browser: status %d, want 400", code)
	}
	oe.noUser("bob")
	if oe.signedIn(c) {
		t.Fatal("signed in with a wrong state")
	}
}

func TestOIDCRefusesWrongNonce(t *testing.T) {
	t.Parallel()
	oe := newOIDCEnv(t, nil)
	oe.op.setGroups("id-bob", "sm-viewers")
	oe.op.wrongNonce.Store(true)
	c := oe.client()
	code, _, body := oe.signIn(c, "bob")
	if code != http.StatusUnauthorized || !strings.Contains(body, "could not be verified") {
		t.Fatalf("wrong nonce: status %d: %.500s", code, body)
	}
	oe.noUser("bob")
	if oe.signedIn(c) {
		t.Fatal("signed in with a wrong nonce")
	}
}

func TestOIDCRefusesTamperedIDToken(t *testing.T) {
	t.Parallel()
	oe := newOIDCEnv(t, nil)
	oe.op.setGroups("id-bob", "sm-viewers")
	oe.tamper.Store(true)
	c := oe.client()
	code, _, body := oe.signIn(c, "bob")
	if code != http.StatusUnauthorized || !strings.Contains(body, "could not be verified") {
		t.Fatalf("tampered ID token: status %d: %.500s", code, body)
	}
	oe.noUser("bob")
	// The same flow untampered works, so the refusal was the signature's.
	oe.tamper.Store(false)
	if code, _, _ := oe.signIn(c, "bob"); code != http.StatusSeeOther {
		t.Fatalf("untampered sign-in: status %d", code)
	}
	if u := oe.user("bob"); u.Role != store.RoleViewer {
		t.Fatalf("bob: role %s, want viewer", u.Role)
	}
}

func TestOIDCRefusesExpiredIDToken(t *testing.T) {
	t.Parallel()
	// The master's clock is two hours ahead: the provider's one-hour token has expired.
	oe := newOIDCEnv(t, func(c *handlers.OIDCConfig) { c.Now = func() time.Time { return time.Now().Add(2 * time.Hour) } })
	oe.op.setGroups("id-bob", "sm-viewers")
	c := oe.client()
	code, _, body := oe.signIn(c, "bob")
	if code != http.StatusUnauthorized || !strings.Contains(body, "could not be verified") {
		t.Fatalf("expired ID token: status %d: %.500s", code, body)
	}
	oe.noUser("bob")
}

func TestOIDCRefusesUserInNoMappedGroup(t *testing.T) {
	t.Parallel()
	oe := newOIDCEnv(t, nil)
	oe.op.setGroups("id-carol", "staff", "finance")
	c := oe.client()
	code, _, body := oe.signIn(c, "carol")
	if code != http.StatusForbidden || !strings.Contains(body, "grants a ScheduleMaster role") {
		t.Fatalf("no mapped group: status %d: %.800s", code, body)
	}
	oe.noUser("carol")
	var evs []store.Event
	if err := oe.st.DB.NewSelect().Model(&evs).Where("action = ?", "user.login").Where("target = ?", "carol").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Outcome != store.OutcomeError || !strings.HasPrefix(evs[0].Detail, "method oidc") {
		t.Fatalf("refusal events: %+v", evs)
	}
}

func TestOIDCRefusesClashWithLocalUser(t *testing.T) {
	t.Parallel()
	storetest.Run(t, testOIDCClash)
}

func testOIDCClash(t *testing.T, ns storetest.NamedStore) {
	oe := newOIDCEnvOn(t, ns, nil)
	oe.addUser("dave", "dave-password-1", store.RoleViewer)
	oe.op.setGroups("id-dave", "sm-admins")
	c := oe.client()
	code, _, body := oe.signIn(c, "dave")
	if code != http.StatusForbidden || !strings.Contains(body, "already exists") {
		t.Fatalf("clash with a local user: status %d: %.800s", code, body)
	}
	if u := oe.user("dave"); u.Role != store.RoleViewer || u.AuthMethod != "" {
		t.Fatalf("local dave changed: %+v", u)
	}
	if oe.signedIn(c) {
		t.Fatal("signed in as the local user")
	}
}

func TestOIDCRefusesInvalidUsername(t *testing.T) {
	t.Parallel()
	oe := newOIDCEnv(t, nil)
	oe.op.setGroups("id-eve@example.com", "sm-viewers")
	code, _, body := oe.signIn(oe.client(), "eve@example.com")
	if code != http.StatusForbidden || !strings.Contains(body, "may only contain letters") {
		t.Fatalf("invalid username: status %d: %.800s", code, body)
	}
	oe.noUser("eve@example.com")
}
