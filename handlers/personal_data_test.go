package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestURLPasswordsAreMaskedForEveryRole: a password in a delayed task's
// notify_url and in the webhook URL setting is shown as the mask to admins
// and viewers, in the API and the console; the stored value keeps it, and
// saving the settings form as shown keeps it too.
func TestURLPasswordsAreMaskedForEveryRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	ctx := context.Background()
	if err := store.CreateNode(ctx, e.st.DB, &store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1", Mode: store.ModeManual}); err != nil {
		t.Fatal(err)
	}
	if err := store.UpsertRegisteredNode(ctx, e.st.DB, &store.Node{Name: "master", Type: store.TypeMaster, Protocol: "http", Host: "127.0.0.1:1", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	const secret = "cb-pw-secret-11"
	st, created := e.do(admin, "POST", "/api/v1/delayed", `{"source_app":"shop","topic":"t","content_key":"1","delay":"30m",
		"notify_url":"http://cb:`+secret+`@127.0.0.1:9/cb","notify_body":"{}","content_type":"application/json"}`, nil)
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("create delayed: %d %s", st, created)
	}
	d := decodeDelayed(t, created)
	if d.NotifyURL != "http://cb:"+protocol.SecretMask+"@127.0.0.1:9/cb" {
		t.Fatalf("create answer notify_url = %q", d.NotifyURL)
	}
	row, err := store.GetDelayed(ctx, e.st.DB, d.ID)
	if err != nil || !strings.Contains(row.NotifyURL, secret) {
		t.Fatalf("stored notify_url = %q, %v", row.NotifyURL, err)
	}
	for who, c := range map[string]*http.Client{"admin": admin, "viewer": viewer} {
		for _, path := range []string{"/api/v1/delayed/" + d.ID, "/api/v1/delayed", "/delayed/" + d.ID, "/delayed"} {
			st, page := e.do(c, "GET", path, "", nil)
			if st != http.StatusOK || strings.Contains(page, secret) {
				t.Fatalf("%s GET %s: %d, shows the password: %v", who, path, st, strings.Contains(page, secret))
			}
		}
		if _, page := e.do(c, "GET", "/delayed/"+d.ID, "", nil); !strings.Contains(page, "cb:"+protocol.SecretMask+"@") {
			t.Fatalf("%s: the delayed page does not show the masked URL", who)
		}
	}

	// The webhook URL setting: masked on the form, kept when saved as shown.
	const hook = "hook-pw-secret-12"
	masked := "https://ops:" + protocol.SecretMask + "@hooks.example.com/x"
	settingsSave(e, admin, settingsWith(settingsGood(), "webhook_url", "https://ops:"+hook+"@hooks.example.com/x"))
	for who, c := range map[string]*http.Client{"admin": admin, "viewer": viewer} {
		if _, page := e.do(c, "GET", "/settings", "", nil); strings.Contains(page, hook) {
			t.Fatalf("the settings page shows the webhook password to the %s", who)
		}
	}
	if _, page := e.do(admin, "GET", "/settings", "", nil); !strings.Contains(page, `value="`+masked+`"`) {
		t.Fatal("the settings form does not show the masked webhook URL")
	}
	// Saved as shown: the password stays.
	settingsSave(e, admin, settingsWith(settingsGood(), "webhook_url", masked))
	if v, err := store.GetSetting(ctx, e.st.DB, store.SettingWebhookURL); err != nil || !strings.Contains(v, hook) {
		t.Fatalf("saving the masked form lost the webhook password: %q %v", v, err)
	}
	vals := settingsGood()
	// The mask moved to another host is refused, not sent there.
	vals.Set("webhook_url", "https://ops:"+protocol.SecretMask+"@evil.example.com/x")
	resp := e.postForm(admin, "/settings", vals)
	if page := body(t, resp); resp.StatusCode < 400 || !strings.Contains(page, "re-enter its password") {
		t.Fatalf("mask sent to another host: %d", resp.StatusCode)
	}
	if v, _ := store.GetSetting(ctx, e.st.DB, store.SettingWebhookURL); !strings.Contains(v, "hooks.example.com") {
		t.Fatalf("a refused save changed the webhook URL: %q", v)
	}
}

// TestViewersSeeNoEmailsInEvents: e-mail addresses in the event log (a
// user's e-mail change) are shown to admins only, in the API and the page.
func TestViewersSeeNoEmailsInEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	e.addUser("vic", "vic-password-1", store.RoleViewer)
	viewer := e.login("vic", "vic-password-1")
	const mail = "carol.private@example.com"
	resp := e.postForm(admin, "/users", url.Values{"username": {"carol"}, "role": {"viewer"}, "email": {mail},
		"password": {"carol-password-1"}, "password_confirm": {"carol-password-1"}})
	if resp.StatusCode >= 400 {
		t.Fatalf("create carol: %d", resp.StatusCode)
	}
	if st, b := e.do(admin, "PATCH", "/api/v1/users/carol", `{"email":"`+mail+`"}`, nil); st != http.StatusOK {
		t.Fatalf("set carol's email: %d %s", st, b)
	}
	if _, b := e.do(admin, "GET", "/api/v1/events?target_type=user", "", nil); !strings.Contains(b, mail) {
		t.Fatalf("admin's event log lacks the e-mail (the test shows nothing): %s", b)
	}
	for _, path := range []string{"/api/v1/events", "/api/v1/events?target_type=user", "/events", "/events?target_type=user",
		"/api/v1/users", "/api/v1/users/carol", "/users"} {
		st, b := e.do(viewer, "GET", path, "", nil)
		if st != http.StatusOK || strings.Contains(b, mail) || strings.Contains(b, "example.com") {
			t.Fatalf("viewer GET %s: %d, shows an e-mail: %v", path, st, strings.Contains(b, "example.com"))
		}
	}
	if _, b := e.do(viewer, "GET", "/api/v1/events?target_type=user", "", nil); !strings.Contains(b, "[e-mail hidden]") {
		t.Fatalf("viewer's event log does not say an e-mail was hidden: %s", b)
	}
}
