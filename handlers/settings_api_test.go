package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// settingsAPIAnswer is the part of GET /api/v1/settings the tests read.
type settingsAPIAnswer struct {
	HealthInterval    string            `json:"health_interval"`
	RunRetentionDays  int               `json:"run_retention_days"`
	PruneOfflineAfter string            `json:"prune_offline_after"`
	ApproveNewNodes   bool              `json:"approve_new_nodes"`
	SMTPHost          string            `json:"smtp_host"`
	SMTPUsername      string            `json:"smtp_username"`
	SMTPPasswordSet   bool              `json:"smtp_password_set"`
	WebhookURL        string            `json:"webhook_url"`
	Pinned            map[string]string `json:"pinned"`
}

// Settings as code: a PATCH changes only the fields it names, validated with
// the rest (a bad value changes nothing), the SMTP password is write-only,
// two PATCHes of different fields at once both land, and only cluster
// admins may read or change them.
func TestSettingsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	get := func() settingsAPIAnswer {
		t.Helper()
		st, body := e.do(admin, "GET", "/api/v1/settings", "", nil)
		if st != http.StatusOK {
			t.Fatalf("GET settings: %d %s", st, body)
		}
		return decode[settingsAPIAnswer](t, body)
	}
	patch := func(body string) (int, string) { return e.do(admin, "PATCH", "/api/v1/settings", body, nil) }

	first := get() // the test master's configured health interval
	if first.HealthInterval == "" || first.RunRetentionDays != 30 || first.SMTPPasswordSet || first.ApproveNewNodes {
		t.Fatalf("defaults: %+v", first)
	}
	if st, body := patch(`{"run_retention_days":14,"prune_offline_after":"7d","approve_new_nodes":true}`); st != http.StatusOK {
		t.Fatalf("PATCH: %d %s", st, body)
	}
	s := get()
	if s.RunRetentionDays != 14 || s.PruneOfflineAfter != "168h0m0s" || !s.ApproveNewNodes || s.HealthInterval != first.HealthInterval {
		t.Fatalf("after PATCH: %+v; want retention 14, prune 7 days, approval on, the rest kept", s)
	}
	// SMTP with a password: the answer never holds it.
	st, body := patch(`{"smtp_host":"smtp.example.com","smtp_from":"sm@example.com","smtp_username":"mailer","smtp_password":"pw-never-shown","webhook_url":"https://u:hook-secret@hooks.example.com/x"}`)
	if st != http.StatusOK || strings.Contains(body, "pw-never-shown") || strings.Contains(body, "hook-secret") {
		t.Fatalf("PATCH smtp: %d %s (the answer must not hold the password or the URL's)", st, body)
	}
	if s := get(); !s.SMTPPasswordSet || s.SMTPUsername != "mailer" || strings.Contains(s.WebhookURL, "hook-secret") {
		t.Fatalf("after smtp: %+v", s)
	}
	// The masked URL sent back keeps its password.
	if st, body := patch(`{"webhook_url":"` + get().WebhookURL + `"}`); st != http.StatusOK {
		t.Fatalf("PATCH the masked URL back: %d %s", st, body)
	}
	if v, _ := settingsStored(e, store.SettingWebhookURL); v != "https://u:hook-secret@hooks.example.com/x" {
		t.Fatalf("stored webhook URL after the mask came back: %q", v)
	}
	// Bad values: 400 naming the field, nothing changes.
	for _, bad := range []struct{ body, field string }{
		{`{"health_interval":"soon"}`, "health_interval"},
		{`{"health_timeout":"1h"}`, "health_timeout"},
		{`{"run_retention_days":-1,"max_failures":3}`, "run_retention_days"},
		{`{"smtp_username":"other","smtp_password":""}`, "smtp_password"},
		{`{"webhook_url":"javascript:alert(1)"}`, "webhook_url"},
	} {
		st, body := patch(bad.body)
		if st != http.StatusBadRequest || !strings.Contains(body, `"`+bad.field+`"`) {
			t.Errorf("PATCH %s: %d %s; want 400 naming %s", bad.body, st, body, bad.field)
		}
	}
	for _, bad := range []string{`{"no_such_setting":1}`, `{"max_failures":"3"}`, `not json`, "{\"smtp_host\":\"\xff\"}"} {
		if st, body := patch(bad); st != http.StatusBadRequest {
			t.Errorf("PATCH %q: %d %s; want 400", bad, st, body)
		}
	}
	if s := get(); s.RunRetentionDays != 14 || s.SMTPUsername != "mailer" || s.HealthInterval != first.HealthInterval {
		t.Fatalf("refused PATCHes changed something: %+v", s)
	}
	// Two PATCHes of different fields at once: both land.
	var wg sync.WaitGroup
	for _, b := range []string{`{"run_retention_days":21}`, `{"smtp_host":"mail.example.com"}`} {
		wg.Go(func() {
			if st, body := patch(b); st != http.StatusOK {
				t.Errorf("PATCH %s: %d %s", b, st, body)
			}
		})
	}
	wg.Wait()
	if s := get(); s.RunRetentionDays != 21 || s.SMTPHost != "mail.example.com" {
		t.Fatalf("racing PATCHes: %+v; want both", s)
	}
	// Cluster admins only.
	e.addUser("viewer", "viewer-password-1", store.RoleViewer)
	viewer := e.login("viewer", "viewer-password-1")
	if st, _ := e.do(viewer, "GET", "/api/v1/settings", "", nil); st != http.StatusForbidden {
		t.Errorf("viewer GET: %d, want 403", st)
	}
	if st, _ := e.do(viewer, "PATCH", "/api/v1/settings", `{"run_retention_days":1}`, nil); st != http.StatusForbidden {
		t.Errorf("viewer PATCH: %d, want 403", st)
	}
	if s := get(); s.RunRetentionDays != 21 {
		t.Fatalf("a viewer's PATCH changed retention to %d", s.RunRetentionDays)
	}
}

// The console's form keeps a field it did not send at its stored value (a
// client written before the field existed), where it answered 422; a
// checkbox sent unticked (its hidden 0) turns off.
func TestSettingsFormKeepsOmittedFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.OpenSQLite(t))
	admin := e.login("admin", "admin-password-1")
	settingsSave(e, admin, settingsWith(settingsGood(), "approve_new_nodes", "1", "webhook_allow_hosts", "hooks.internal"))
	old := settingsGood()
	delete(old, "prune_offline_after")
	delete(old, "run_retention_days")
	settingsSave(e, admin, settingsWith(old, "max_failures", "5"))
	for key, want := range map[string]string{store.SettingMaxFailures: "5", store.SettingRunRetentionDays: "7",
		store.SettingApproveNodes: "true", store.SettingWebhookAllowHosts: "hooks.internal", store.SettingPruneOfflineAfter: "24h0m0s"} {
		if v, _ := settingsStored(e, key); v != want {
			t.Errorf("%s = %q after a form without it, want %q (kept)", key, v, want)
		}
	}
	// The page's own form sends the hidden 0 of an unticked box.
	settingsSave(e, admin, url.Values(settingsWith(settingsGood(), "approve_new_nodes", "0")))
	if v, _ := settingsStored(e, store.SettingApproveNodes); v != "false" {
		t.Errorf("approval after an unticked box: %q, want false", v)
	}
	v := settingsWith(settingsGood())
	v["approve_new_nodes"] = []string{"0", "1"} // hidden 0, then the ticked box
	settingsSave(e, admin, v)
	if v, _ := settingsStored(e, store.SettingApproveNodes); v != "true" {
		t.Errorf("approval after a ticked box: %q, want true", v)
	}
	if _, page := e.do(admin, "GET", "/settings", "", nil); !strings.Contains(page, `<input type="hidden" name="approve_new_nodes" value="0">`) {
		t.Error("the settings page has no hidden 0 before the approval box")
	}
}
