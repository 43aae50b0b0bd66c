package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// settingsKeys are every stored setting the page edits.
var settingsKeys = []string{
	store.SettingHealthInterval, store.SettingHealthTimeout, store.SettingMaxFailures, store.SettingDefaultHTTPTimeout,
	store.SettingRunRetentionDays, store.SettingSMTPHost, store.SettingSMTPPort, store.SettingSMTPFrom,
	store.SettingSMTPUsername, store.SettingSMTPPassword, store.SettingSMTPTLS, store.SettingWebhookURL, store.SettingPublicURL,
}

// goodSettings is a valid settings form.
func settingsGood() url.Values {
	return url.Values{
		"health_interval": {"5s"}, "health_timeout": {"1s"}, "max_failures": {"4"},
		"default_http_timeout": {"20s"}, "run_retention_days": {"7"},
		"smtp_host": {""}, "smtp_port": {"587"}, "smtp_from": {""}, "smtp_username": {""}, "smtp_password": {""},
		"smtp_tls": {"starttls"}, "webhook_url": {""}, "public_url": {""}, "prune_offline_after": {"24h"},
	}
}

func settingsWith(v url.Values, kv ...string) url.Values {
	out := maps.Clone(v)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = []string{kv[i+1]}
	}
	return out
}

// post sends a form, as htmx does when hx is set, and returns status and body.
func settingsPost(e *env, c *http.Client, path string, v url.Values, hx bool) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(v.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if hx {
		req.Header.Set("HX-Request", "true")
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func settingsStored(e *env, key string) (string, bool) {
	e.t.Helper()
	v, err := store.GetSetting(context.Background(), e.st.DB, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return v, true
}

func settingsNothingStored(e *env, when string) {
	e.t.Helper()
	for _, k := range settingsKeys {
		if v, ok := settingsStored(e, k); ok {
			e.t.Fatalf("%s: setting %s stored as %q, want nothing stored", when, k, v)
		}
	}
}

func settingsSetEmail(e *env, user, email string) {
	e.t.Helper()
	_, err := e.st.DB.NewUpdate().Model((*store.User)(nil)).Set("email = ?", email).Where("username = ?", user).Exec(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
}

// saveSettings saves a valid form and fails unless it is accepted.
func settingsSave(e *env, c *http.Client, v url.Values) {
	e.t.Helper()
	resp := e.postForm(c, "/settings", v)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/settings" {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("save settings: %d %q, want 303 to /settings\n%s", resp.StatusCode, resp.Header.Get("Location"), b)
	}
}

func TestSettingsBadFieldsAreRefusedInline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	smtp := settingsWith(settingsGood(), "smtp_host", "smtp.example.com", "smtp_from", "scheduler@example.com")
	cases := []struct {
		field string
		form  url.Values
		value string // the bad value, shown again in the form
	}{
		{"health_interval", settingsWith(settingsGood(), "health_interval", "ten seconds"), "ten seconds"},
		{"health_interval", settingsWith(settingsGood(), "health_interval", "500ms", "health_timeout", "200ms"), "500ms"},
		{"health_interval", settingsWith(settingsGood(), "health_interval", "2h"), "2h"},
		{"health_timeout", settingsWith(settingsGood(), "health_timeout", "5s"), "5s"}, // not shorter than the interval
		{"health_timeout", settingsWith(settingsGood(), "health_timeout", "10ms"), "10ms"},
		{"health_timeout", settingsWith(settingsGood(), "health_timeout", "1"), ""},
		{"max_failures", settingsWith(settingsGood(), "max_failures", "0"), "0"},
		{"max_failures", settingsWith(settingsGood(), "max_failures", "three"), "three"},
		{"max_failures", settingsWith(settingsGood(), "max_failures", "101"), "101"},
		{"default_http_timeout", settingsWith(settingsGood(), "default_http_timeout", "1ms"), "1ms"},
		{"default_http_timeout", settingsWith(settingsGood(), "default_http_timeout", ""), ""},
		{"run_retention_days", settingsWith(settingsGood(), "run_retention_days", "-1"), "-1"},
		{"run_retention_days", settingsWith(settingsGood(), "run_retention_days", "3651"), "3651"},
		{"run_retention_days", settingsWith(settingsGood(), "run_retention_days", "1.5"), "1.5"},
		{"smtp_host", settingsWith(smtp, "smtp_host", "bad host!"), "bad host!"},
		{"smtp_port", settingsWith(smtp, "smtp_port", "0"), ""},
		{"smtp_port", settingsWith(smtp, "smtp_port", "70000"), "70000"},
		{"smtp_port", settingsWith(smtp, "smtp_port", "smtp"), "smtp"},
		{"smtp_from", settingsWith(smtp, "smtp_from", "not-an-address"), "not-an-address"},
		{"smtp_from", settingsWith(smtp, "smtp_from", "Ops <ops@example.com>"), ""},
		{"smtp_from", settingsWith(smtp, "smtp_from", ""), ""},
		{"smtp_password", settingsWith(smtp, "smtp_username", "mailer"), "mailer"}, // a username needs a password
		{"smtp_tls", settingsWith(smtp, "smtp_tls", "ssl"), ""},
		{"webhook_url", settingsWith(settingsGood(), "webhook_url", "ftp://hooks.example.com/x"), "ftp://hooks.example.com/x"},
		{"webhook_url", settingsWith(settingsGood(), "webhook_url", "hooks.example.com"), "hooks.example.com"},
		{"public_url", settingsWith(settingsGood(), "public_url", "/relative"), "/relative"},
	}
	for _, tc := range cases {
		status, body := settingsPost(e, admin, "/settings", tc.form, false)
		if status != http.StatusUnprocessableEntity {
			t.Fatalf("%s=%q: status %d, want 422", tc.field, tc.form.Get(tc.field), status)
		}
		m := regexp.MustCompile(`<p class="field-error" id="error-` + tc.field + `">([^<]+)</p>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s=%q: no inline error for the field in\n%s", tc.field, tc.form.Get(tc.field), body)
		}
		t.Logf("%s=%q: %s", tc.field, tc.form.Get(tc.field), m[1])
		if !strings.Contains(body, `id="form-errors"`) || !strings.Contains(body, `id="save-settings"`) {
			t.Fatalf("%s: the form is not shown again with its summary", tc.field)
		}
		if tc.value != "" && !strings.Contains(body, `value="`+settingsEscape(tc.value)+`"`) {
			t.Fatalf("%s: the typed value %q is not kept in the form", tc.field, tc.value)
		}
		settingsNothingStored(e, tc.field+" refused")
	}
	// Several bad fields at once: all of them are reported.
	status, body := settingsPost(e, admin, "/settings", settingsWith(settingsGood(), "health_interval", "x", "max_failures", "0", "webhook_url", "nope"), false)
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("three bad fields: %d", status)
	}
	for _, f := range []string{"health_interval", "max_failures", "webhook_url"} {
		if !strings.Contains(body, `id="error-`+f+`"`) {
			t.Fatalf("three bad fields: no error for %s", f)
		}
	}
	settingsNothingStored(e, "after all refusals")
	if h := e.m.HealthConfig(); h.Interval != time.Hour || h.MaxFailures != 3 {
		t.Fatalf("health config changed by refused saves: %+v", h)
	}
}

func settingsEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

func TestSettingsSaveStoresAndApplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")

	status, body := e.do(admin, "GET", "/settings", "", nil)
	if status != 200 || !strings.Contains(body, `id="save-settings"`) || !strings.Contains(body, `id="test-notifications"`) {
		t.Fatalf("GET /settings as admin: %d, want the Save and Test buttons", status)
	}
	if !strings.Contains(body, `value="1h0m0s"`) || strings.Contains(body, "pinned-note") {
		t.Fatalf("GET /settings: want the health interval in force (1h) and no pinned note")
	}

	settingsSave(e, admin, settingsWith(settingsGood(), "smtp_host", "smtp.example.com", "smtp_port", "2525", "smtp_from", "scheduler@example.com",
		"smtp_username", "mailer", "smtp_password", "first-secret-pw", "smtp_tls", "tls",
		"webhook_url", "https://hooks.example.com/sm", "public_url", "https://sm.example.com"))
	want := map[string]string{
		store.SettingHealthInterval: "5s", store.SettingHealthTimeout: "1s", store.SettingMaxFailures: "4",
		store.SettingDefaultHTTPTimeout: "20s", store.SettingRunRetentionDays: "7", store.SettingSMTPHost: "smtp.example.com",
		store.SettingSMTPPort: "2525", store.SettingSMTPFrom: "scheduler@example.com", store.SettingSMTPUsername: "mailer",
		store.SettingSMTPPassword: "first-secret-pw", store.SettingSMTPTLS: "tls",
		store.SettingWebhookURL: "https://hooks.example.com/sm", store.SettingPublicURL: "https://sm.example.com",
	}
	for k, v := range want {
		if got, ok := settingsStored(e, k); !ok || got != v {
			t.Fatalf("stored %s = %q (%v), want %q", k, got, ok, v)
		}
	}
	if h := e.m.HealthConfig(); h.Interval != 5*time.Second || h.Timeout != time.Second || h.MaxFailures != 4 {
		t.Fatalf("health config in force %+v, want 5s/1s/4", h)
	}
	if st, _ := e.m.Settings(); st.DefaultHTTPTimeout != 20*time.Second || st.RunRetentionDays != 7 || st.SMTPPort != 2525 {
		t.Fatalf("settings in force %+v", st)
	}

	// The page shows the flash once, the new values, and never the password.
	status, body = e.do(admin, "GET", "/settings", "", nil)
	if status != 200 || !strings.Contains(body, "Settings saved") || !strings.Contains(body, `value="5s"`) || !strings.Contains(body, `value="2525"`) {
		t.Fatalf("GET /settings after save: %d, want the flash and the new values\n%s", status, body)
	}
	if strings.Contains(body, "first-secret-pw") {
		t.Fatal("the SMTP password is rendered back")
	}
	if !strings.Contains(body, `<strong data-testid="password-state">set</strong>`) {
		t.Fatal("the page does not say the password is set")
	}
	if _, body = e.do(admin, "GET", "/settings", "", nil); strings.Contains(body, "Settings saved") {
		t.Fatal("the flash shows twice")
	}

	// An empty password field keeps the stored password.
	settingsSave(e, admin, settingsWith(settingsGood(), "health_interval", "2s", "smtp_host", "smtp.example.com", "smtp_port", "2525",
		"smtp_from", "scheduler@example.com", "smtp_username", "mailer", "smtp_tls", "tls"))
	if got, _ := settingsStored(e, store.SettingSMTPPassword); got != "first-secret-pw" {
		t.Fatalf("password after a save with an empty field: %q, want it kept", got)
	}
	if h := e.m.HealthConfig(); h.Interval != 2*time.Second {
		t.Fatalf("interval in force %s, want 2s", h.Interval)
	}
	// A new password replaces it; the clear box removes it.
	settingsSave(e, admin, settingsWith(settingsGood(), "smtp_host", "smtp.example.com", "smtp_from", "scheduler@example.com",
		"smtp_username", "mailer", "smtp_password", "second-secret-pw"))
	if got, _ := settingsStored(e, store.SettingSMTPPassword); got != "second-secret-pw" {
		t.Fatalf("password after a change: %q", got)
	}
	// With a username, removing the password is refused inline.
	status, body = settingsPost(e, admin, "/settings", settingsWith(settingsGood(), "smtp_host", "smtp.example.com", "smtp_from", "scheduler@example.com",
		"smtp_username", "mailer", "smtp_password_clear", "1"), false)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `id="error-smtp_password"`) || strings.Contains(body, "second-secret-pw") {
		t.Fatalf("clear the password with a username: %d, want 422 on smtp_password without the password shown", status)
	}
	settingsSave(e, admin, settingsWith(settingsGood(), "smtp_password_clear", "1"))
	if got, _ := settingsStored(e, store.SettingSMTPPassword); got != "" {
		t.Fatalf("password after clearing: %q, want empty", got)
	}
	if _, body = e.do(admin, "GET", "/settings", "", nil); !strings.Contains(body, `<strong data-testid="password-state">not set</strong>`) {
		t.Fatal("the page does not say the password is not set")
	}
}

func TestSettingsViewerReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	var hits int
	var mu sync.Mutex
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	settingsSave(e, admin, settingsWith(settingsGood(), "smtp_host", "smtp.example.com", "smtp_from", "scheduler@example.com",
		"smtp_username", "mailer", "smtp_password", "viewer-must-not-see", "webhook_url", hook.URL))

	e.addUser("viewer", "viewer-password-1", store.RoleViewer)
	v := e.login("viewer", "viewer-password-1")
	status, body := e.do(v, "GET", "/settings", "", nil)
	if status != 200 {
		t.Fatalf("GET /settings as viewer: %d", status)
	}
	// Where notifications go is for admins only (issue 8): no SMTP settings,
	// no webhook URL, not even whether a password is set.
	for _, s := range []string{`id="save-settings"`, `id="test-notifications"`, `action="/settings/test"`, "viewer-must-not-see", `id="smtp_password_clear"`,
		`value="smtp.example.com"`, `value="scheduler@example.com"`, `value="mailer"`, hook.URL, `<strong data-testid="password-state">set</strong>`} {
		if strings.Contains(body, s) {
			t.Fatalf("viewer page contains %q", s)
		}
	}
	for _, s := range []string{`id="read-only-note"`, `value="5s"`} {
		if !strings.Contains(body, s) {
			t.Fatalf("viewer page lacks %q", s)
		}
	}
	if !regexp.MustCompile(`<fieldset class="card" id="health-fields" disabled`).MatchString(body) {
		t.Fatal("viewer: the fields are not disabled")
	}

	for _, hx := range []bool{false, true} {
		status, body = settingsPost(e, v, "/settings", settingsWith(settingsGood(), "health_interval", "9s", "smtp_password", "hijack"), hx)
		if status != http.StatusForbidden {
			t.Fatalf("viewer POST /settings (hx %v): %d, want 403", hx, status)
		}
		status, _ = settingsPost(e, v, "/settings/test", nil, hx)
		if status != http.StatusForbidden {
			t.Fatalf("viewer POST /settings/test (hx %v): %d, want 403", hx, status)
		}
	}
	if got, _ := settingsStored(e, store.SettingHealthInterval); got != "5s" {
		t.Fatalf("stored interval after viewer posts: %q", got)
	}
	if got, _ := settingsStored(e, store.SettingSMTPPassword); got != "viewer-must-not-see" {
		t.Fatalf("stored password after viewer posts: %q", got)
	}
	if h := e.m.HealthConfig(); h.Interval != 5*time.Second {
		t.Fatalf("interval in force after viewer posts: %s", h.Interval)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 {
		t.Fatalf("the viewer's test request reached the webhook %d times", hits)
	}
}

// TestSettingsPinnedHealthValues: a health value fixed by a flag is shown in
// force and explained; saving stores the edited value without applying it.
func TestSettingsPinnedHealthValues(t *testing.T) {
	t.Parallel()
	ns := storetest.OpenSQLite(t)
	ctx := storetest.Ctx(t)
	log := storetest.Logger(t)
	m := master.New(master.Config{PasswordCost: testPasswordCost, Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: 2 * time.Second, Timeout: 500 * time.Millisecond, MaxFailures: 3},
		Pinned: master.Pinned{HealthInterval: true, MaxFailures: true}}, ns.Store, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: ns.Store, m: m, srv: srv}
	e.addUser("admin", "admin-password-1", store.RoleAdmin)
	admin := e.login("admin", "admin-password-1")

	status, body := e.do(admin, "GET", "/settings", "", nil)
	if status != 200 {
		t.Fatalf("GET /settings: %d", status)
	}
	for _, s := range []string{
		`id="health_interval_in_force" value="2s" disabled`,
		"set by --health-interval (flag, env SM_HEALTH_INTERVAL or config file); the stored value below takes effect after a restart without it",
		"set by --max-failures (flag, env SM_MAX_FAILURES or config file)",
		`id="health_interval" name="health_interval" value="10s"`, // nothing stored: the default applies after a restart
	} {
		if !strings.Contains(body, s) {
			t.Fatalf("pinned page lacks %q\n%s", s, body)
		}
	}
	if strings.Contains(body, `id="pinned-health_timeout"`) || strings.Contains(body, `id="health_timeout_in_force"`) {
		t.Fatal("the probe timeout is not pinned but shown as pinned")
	}

	settingsSave(e, admin, settingsWith(settingsGood(), "health_interval", "30s", "health_timeout", "700ms", "max_failures", "9"))
	if got, _ := settingsStored(e, store.SettingHealthInterval); got != "30s" {
		t.Fatalf("stored interval %q, want 30s", got)
	}
	if hc := e.m.HealthConfig(); hc.Interval != 2*time.Second || hc.MaxFailures != 3 || hc.Timeout != 700*time.Millisecond {
		t.Fatalf("in force %+v: want the pinned 2s and 3, and the stored timeout 700ms", hc)
	}
	_, body = e.do(admin, "GET", "/settings", "", nil)
	for _, s := range []string{"health values set by flag", `id="health_interval_in_force" value="2s" disabled`,
		`id="health_interval" name="health_interval" value="30s"`, `id="max_failures" name="max_failures" value="9"`} {
		if !strings.Contains(body, s) {
			t.Fatalf("page after save lacks %q", s)
		}
	}
}

// settingsWebhookSink records the JSON bodies it receives.
type settingsWebhookSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	status int
}

func newSettingsWebhookSink(t *testing.T, status int) *settingsWebhookSink {
	s := &settingsWebhookSink{status: status}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		w.WriteHeader(s.status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *settingsWebhookSink) received() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// resultOf returns the rendered result item of a channel.
func settingsResult(t *testing.T, body, channel string) (ok bool, text string) {
	t.Helper()
	m := regexp.MustCompile(`(?s)<li class="[^"]*" data-channel="` + channel + `" data-ok="(true|false)">(.*?)</li>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s result in\n%s", channel, body)
	}
	return m[1] == "true", regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[2], " ")
}

func TestSettingsTestWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")

	// Nothing set up: both channels say so, readably.
	status, body := settingsPost(e, admin, "/settings/test", nil, true)
	if status != 200 || !strings.HasPrefix(strings.TrimSpace(body), `<div id="notify-results"`) || strings.Contains(body, "<html") {
		t.Fatalf("test with nothing set up: %d, want the results fragment\n%s", status, body)
	}
	if ok, text := settingsResult(t, body, "webhook"); ok || !strings.Contains(text, "no webhook URL is set") {
		t.Fatalf("webhook result with nothing set up: %v %q", ok, text)
	}
	if ok, text := settingsResult(t, body, "email"); ok || !strings.Contains(text, "SMTP is not set up") {
		t.Fatalf("email result with nothing set up: %v %q", ok, text)
	}

	// A local receiver gets a JSON test event.
	sink := newSettingsWebhookSink(t, http.StatusNoContent)
	settingsSave(e, admin, settingsWith(settingsGood(), "webhook_url", sink.srv.URL+"/hook"))
	status, body = settingsPost(e, admin, "/settings/test", nil, true)
	if status != 200 {
		t.Fatalf("test webhook: %d", status)
	}
	if ok, text := settingsResult(t, body, "webhook"); !ok || !strings.Contains(text, "sent") || !strings.Contains(text, sink.srv.URL+"/hook") {
		t.Fatalf("webhook result: %v %q, want sent to the receiver", ok, text)
	}
	got := sink.received()
	if len(got) != 1 || got[0]["event"] != "test" {
		t.Fatalf("the receiver got %v, want one JSON with \"event\":\"test\"", got)
	}
	if msg, _ := got[0]["message"].(string); !strings.Contains(msg, "admin") {
		t.Fatalf("test webhook message %q does not name who sent it", msg)
	}

	// Without htmx the whole page comes back with the results.
	status, body = settingsPost(e, admin, "/settings/test", nil, false)
	if status != 200 || !strings.Contains(body, `id="settings-form"`) || !strings.Contains(body, `id="notify-results"`) {
		t.Fatalf("non-htmx test: %d, want the settings page with the results", status)
	}
	if ok, _ := settingsResult(t, body, "webhook"); !ok || len(sink.received()) != 2 {
		t.Fatalf("non-htmx webhook test: ok %v, %d received", ok, len(sink.received()))
	}

	// A receiver answering 500: a readable error.
	bad := newSettingsWebhookSink(t, http.StatusInternalServerError)
	settingsSave(e, admin, settingsWith(settingsGood(), "webhook_url", bad.srv.URL))
	_, body = settingsPost(e, admin, "/settings/test", nil, true)
	if ok, text := settingsResult(t, body, "webhook"); ok || !strings.Contains(text, "answered 500") {
		t.Fatalf("webhook answering 500: %v %q", ok, text)
	}

	// A closed port: a readable error, no crash.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/hook"
	l.Close()
	settingsSave(e, admin, settingsWith(settingsGood(), "webhook_url", closed))
	status, body = settingsPost(e, admin, "/settings/test", nil, true)
	if status != 200 {
		t.Fatalf("test webhook on a closed port: %d", status)
	}
	ok, text := settingsResult(t, body, "webhook")
	if ok || !strings.Contains(text, "unreachable") || !strings.Contains(text, "refused") {
		t.Fatalf("webhook on a closed port: %v %q, want a readable error", ok, text)
	}
	t.Logf("closed port says: %s", strings.Join(strings.Fields(text), " "))
	if status, _ := e.do(admin, "GET", "/settings", "", nil); status != 200 {
		t.Fatalf("the console after a failed test: %d", status)
	}
}

// settingsSMTPSink is a tiny SMTP server on loopback that keeps the messages it gets.
type settingsSMTPSink struct {
	addr string
	mu   sync.Mutex
	msgs []settingsSMTPMessage
}

type settingsSMTPMessage struct {
	From string
	To   []string
	Data string
}

func newSettingsSMTPSink(t *testing.T) *settingsSMTPSink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &settingsSMTPSink{addr: l.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(conn)
			}()
		}
	}()
	return s
}

func (s *settingsSMTPSink) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(conn)
	say := func(line string) { _, _ = io.WriteString(conn, line+"\r\n") }
	say("220 sink.test ESMTP fake")
	var cur settingsSMTPMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(line)
		switch {
		case strings.HasPrefix(verb, "EHLO"), strings.HasPrefix(verb, "HELO"):
			say("250-sink.test greets you")
			say("250 8BITMIME")
		case strings.HasPrefix(verb, "MAIL FROM:"):
			cur = settingsSMTPMessage{From: strings.Trim(line[len("MAIL FROM:"):], "<> ")}
			if i := strings.Index(cur.From, ">"); i >= 0 {
				cur.From = cur.From[:i]
			}
			say("250 sender ok")
		case strings.HasPrefix(verb, "RCPT TO:"):
			cur.To = append(cur.To, strings.Trim(line[len("RCPT TO:"):], "<> "))
			say("250 recipient ok")
		case verb == "DATA":
			say("354 end with <CRLF>.<CRLF>")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, "."))
			}
			cur.Data = data.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, cur)
			s.mu.Unlock()
			say("250 queued")
		case verb == "RSET", verb == "NOOP":
			say("250 ok")
		case verb == "QUIT":
			say("221 bye")
			return
		default:
			say("502 not implemented")
		}
	}
}

func (s *settingsSMTPSink) messages() []settingsSMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]settingsSMTPMessage(nil), s.msgs...)
}

func TestSettingsTestEmail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	sink := newSettingsSMTPSink(t)
	host, port, _ := net.SplitHostPort(sink.addr)
	mail := settingsWith(settingsGood(), "smtp_host", host, "smtp_port", port, "smtp_from", "scheduler@example.com", "smtp_tls", "none")
	settingsSave(e, admin, mail)

	// The admin has no e-mail address yet: a readable refusal, nothing sent.
	_, body := settingsPost(e, admin, "/settings/test", nil, true)
	if ok, text := settingsResult(t, body, "email"); ok || !strings.Contains(text, "no e-mail address") {
		t.Fatalf("email result without an address: %v %q", ok, text)
	}
	if n := len(sink.messages()); n != 0 {
		t.Fatalf("%d messages sent to nobody", n)
	}

	settingsSetEmail(e, "admin", "admin@example.com")
	status, body := settingsPost(e, admin, "/settings/test", nil, true)
	if status != 200 {
		t.Fatalf("test email: %d", status)
	}
	if ok, text := settingsResult(t, body, "email"); !ok || !strings.Contains(text, "admin@example.com") || !strings.Contains(text, "sent") {
		t.Fatalf("email result: %v %q, want sent to admin@example.com", ok, text)
	}
	msgs := sink.messages()
	if len(msgs) != 1 {
		t.Fatalf("the SMTP sink got %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.From != "scheduler@example.com" || len(m.To) != 1 || m.To[0] != "admin@example.com" {
		t.Fatalf("envelope from %q to %q, want scheduler@example.com to admin@example.com", m.From, m.To)
	}
	if !strings.Contains(m.Data, "Subject: [ScheduleMaster] test notification") || !strings.Contains(m.Data, "To: admin@example.com") ||
		!strings.Contains(m.Data, "sent by admin") {
		t.Fatalf("message:\n%s", m.Data)
	}

	// starttls against a server without STARTTLS: a readable error.
	settingsSave(e, admin, settingsWith(mail, "smtp_tls", "starttls"))
	_, body = settingsPost(e, admin, "/settings/test", nil, true)
	if ok, text := settingsResult(t, body, "email"); ok || !strings.Contains(text, "does not offer STARTTLS") {
		t.Fatalf("starttls without STARTTLS: %v %q", ok, text)
	}
	// tls against a plain server: a readable error, in bounded time.
	settingsSave(e, admin, settingsWith(mail, "smtp_tls", "tls"))
	start := time.Now()
	_, body = settingsPost(e, admin, "/settings/test", nil, true)
	if ok, text := settingsResult(t, body, "email"); ok || !strings.Contains(text, "smtp "+sink.addr) {
		t.Fatalf("tls against a plain server: %v %q", ok, text)
	} else {
		t.Logf("tls against a plain server (%s): %s", time.Since(start).Round(time.Millisecond), strings.Join(strings.Fields(text), " "))
	}
	// A closed port: a readable error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closedPort, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	settingsSave(e, admin, settingsWith(mail, "smtp_port", closedPort))
	_, body = settingsPost(e, admin, "/settings/test", nil, true)
	if ok, text := settingsResult(t, body, "email"); ok || !strings.Contains(text, "refused") {
		t.Fatalf("smtp on a closed port: %v %q", ok, text)
	} else {
		t.Logf("smtp on a closed port: %s", strings.Join(strings.Fields(text), " "))
	}
	if n := len(sink.messages()); n != 1 {
		t.Fatalf("the sink got %d messages, want still 1", n)
	}
}
