package master_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// The health settings follow flag > env > file (pinned) > stored > default;
// a bad stored value is skipped (moved from cmd/schedulemaster, whose copy of
// the precedence went).
func TestHealthSettingsPrecedence(t *testing.T) {
	t.Parallel()
	stored := map[string]string{store.SettingHealthInterval: "20s", store.SettingHealthTimeout: "5", store.SettingMaxFailures: "7"}
	def := master.DefaultSettings()
	base := master.HealthConfig{Interval: def.HealthInterval, Timeout: def.HealthTimeout, MaxFailures: def.MaxFailures}
	explicit := base
	explicit.Interval, explicit.MaxFailures = 30*time.Second, 2
	cases := []struct {
		name   string
		health master.HealthConfig
		pinned master.Pinned
		stored map[string]string
		want   [3]any
	}{
		{"defaults without stored", master.HealthConfig{}, master.Pinned{}, nil, [3]any{10 * time.Second, 3 * time.Second, 3}},
		{"stored beats default", base, master.Pinned{}, stored, [3]any{20 * time.Second, 5 * time.Second, 7}},
		{"explicit beats stored", explicit, master.Pinned{HealthInterval: true, MaxFailures: true}, stored, [3]any{30 * time.Second, 5 * time.Second, 2}},
		{"bad stored ignored", base, master.Pinned{},
			map[string]string{store.SettingHealthInterval: "soon", store.SettingHealthTimeout: "2h", store.SettingMaxFailures: "0"},
			[3]any{10 * time.Second, 3 * time.Second, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := storetest.OpenSQLite(t)
			ctx := storetest.Ctx(t)
			for k, v := range tc.stored {
				if err := store.SetSetting(ctx, ns.Store.DB, k, v); err != nil {
					t.Fatal(err)
				}
			}
			m := newMaster(t, ns, func(c *master.Config) { c.Health, c.Pinned = tc.health, tc.pinned })
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			h := m.HealthConfig()
			if got := [3]any{h.Interval, h.Timeout, h.MaxFailures}; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("database down", func(t *testing.T) {
		ns := storetest.OpenSQLite(t)
		m := master.New(master.Config{PasswordCost: testPasswordCost, Identity: masterName, ClusterKey: clusterKey}, ns.Store, storetest.Logger(t))
		if err := ns.Store.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err == nil {
			m.Stop(context.Background())
			t.Fatal("Start with the database down succeeded")
		}
	})
}

// Settings saved on one master reach another master on the same database
// within its next health tick (the version poll), and its event names the
// master that acted.
func TestSettingsReachEveryMaster(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		ctx := storetest.Ctx(t)
		m1 := newMaster(t, s)
		m2 := newMaster(t, s, func(c *master.Config) { c.Identity = "master-b" })
		for _, m := range []*master.Master{m1, m2} {
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		next, _ := m1.Settings()
		next.RunRetentionDays, next.MaxFailures, next.HealthInterval = 9, 5, 2*time.Second
		if err := m1.UpdateSettings(master.WithActor(ctx, "admin"), next); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			got, _ := m2.Settings()
			if got.RunRetentionDays == 9 && m2.HealthConfig().MaxFailures == 5 && m2.HealthConfig().Interval == 2*time.Second {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the other master still has %+v", got)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Nothing changed since: a poll reloads nothing and keeps the values.
		m2.PollSettings(ctx)
		if got, _ := m2.Settings(); got.RunRetentionDays != 9 {
			t.Fatalf("after an idle poll: %+v", got)
		}
	})
}

// A settings change is an event naming the actor and the keys changed, and
// never a secret value.
func TestSettingsUpdateIsAnEventWithoutSecrets(t *testing.T) {
	t.Parallel()
	s := storetest.OpenSQLite(t)
	ctx := storetest.Ctx(t)
	m := newMaster(t, s)
	next, _ := m.Settings()
	next.SMTPHost, next.SMTPFrom, next.SMTPUsername, next.SMTPPassword = "smtp.example.com", "sm@example.com", "ops", "smtp-secret-value-1"
	next.WebhookURL = "https://hooks.example.com/T000/secret-path-xyz"
	if err := m.UpdateSettings(master.WithActor(ctx, "alice"), next); err != nil {
		t.Fatal(err)
	}
	evs, _, err := m.Reads().ListEvents(ctx, store.EventFilter{Action: "settings.", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("events %+v, want one settings.update", evs)
	}
	ev := evs[0]
	if ev.Actor != "alice" || ev.Action != "settings.update" {
		t.Fatalf("event %+v", ev)
	}
	for _, key := range []string{store.SettingSMTPHost, store.SettingSMTPPassword, store.SettingWebhookURL} {
		if !strings.Contains(ev.Detail, key) {
			t.Errorf("detail %q does not name %s", ev.Detail, key)
		}
	}
	for _, secret := range []string{"smtp-secret-value-1", "secret-path-xyz", "smtp.example.com"} {
		if strings.Contains(ev.Detail, secret) {
			t.Errorf("detail %q carries the value %q", ev.Detail, secret)
		}
	}
	if strings.Contains(ev.Detail, store.SettingMaxFailures) {
		t.Errorf("detail %q names a key that did not change", ev.Detail)
	}
}
