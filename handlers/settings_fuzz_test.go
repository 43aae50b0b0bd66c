package handlers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// settingsFuzzFields are the fields of the settings form, in the fuzz
// function's argument order.
var settingsFuzzFields = []string{"health_interval", "health_timeout", "max_failures", "default_http_timeout", "run_retention_days",
	"smtp_host", "smtp_port", "smtp_from", "smtp_username", "smtp_tls", "webhook_url", "public_url", "smtp_password"}

// FuzzSettingsForm posts arbitrary values to POST /settings through the real
// router with an admin session: never a 500 or a panic, only 303 (saved),
// 400 (refused text) or 422 (invalid fields), and the settings in force
// always validate.
func FuzzSettingsForm(f *testing.F) {
	f.Add("10s", "3s", "3", "30s", "30", "", "587", "", "", "starttls", "", "", "")
	f.Add("5s", "1s", "2", "1m", "0", "smtp.example.com", "25", "sm@example.com", "mailer", "tls", "https://hooks.example.com/x", "https://sm.example.com", "pw")
	f.Add("0s", "-1s", "-3", "x", "99999999999999999999", "\x00", "0", "not an email", "\xff", "bogus", "javascript:alert(1)", "ftp://x", "\x00")
	f.Add("1h", "59m", "100", "24h", "3650", strings.Repeat("h", 300), "65536", "a@b", "", "none", "http://[::1", "http://x/%zz", "")

	ns := storetest.OpenSQLite(f)
	log := storetest.Discard()
	m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour, Timeout: 500 * time.Millisecond, MaxFailures: 3}}, ns.Store, log)
	h, err := handlers.NewMasterRouter(context.Background(), handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(h)
	f.Cleanup(srv.Close)
	hash, _ := bcrypt.GenerateFromPassword([]byte("admin-password-1"), bcrypt.MinCost)
	if err := store.CreateUser(context.Background(), ns.Store.DB, &store.User{Username: "admin", PasswordHash: string(hash), Role: store.RoleAdmin}); err != nil {
		f.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(srv.URL+"/login", url.Values{"username": {"admin"}, "password": {"admin-password-1"}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		f.Fatalf("login: %v %v", resp, err)
	}
	resp.Body.Close()

	f.Fuzz(func(t *testing.T, hi, ht, mf, dt, rr, host, port, from, user, tls, hook, public, pw string) {
		form := url.Values{}
		for i, v := range []string{hi, ht, mf, dt, rr, host, port, from, user, tls, hook, public, pw} {
			form.Set(settingsFuzzFields[i], v)
		}
		form.Set("prune_offline_after", "24h")
		resp, err := c.PostForm(srv.URL+"/settings", form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusSeeOther, http.StatusBadRequest, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("POST /settings %v: status %d: %.300s", form, resp.StatusCode, body)
		}
		cur, _ := m.Settings()
		if err := cur.Validate(); err != nil {
			t.Fatalf("settings in force do not validate after %v: %v", form, err)
		}
		page, err := c.Get(srv.URL + "/settings")
		if err != nil {
			t.Fatal(err)
		}
		page.Body.Close()
		if page.StatusCode != http.StatusOK {
			t.Fatalf("GET /settings after %v: %d", form, page.StatusCode)
		}
	})
}
