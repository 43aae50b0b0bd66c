package master_test

import (
	"context"
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
		m := master.New(master.Config{Identity: masterName, ClusterKey: clusterKey}, ns.Store, storetest.Logger(t))
		if err := ns.Store.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err == nil {
			m.Stop(context.Background())
			t.Fatal("Start with the database down succeeded")
		}
	})
}
