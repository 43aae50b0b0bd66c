package master_test

import (
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestReadyNeedsMigrations: a master is not ready while its database lacks
// a migration of its build (a restored old backup, say), and ready again
// once the database has it; a migration of a newer build does not count.
func TestReadyNeedsMigrations(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		t.Parallel()
		e := newEnv(t, s)
		if err := e.m.Ready(e.ctx); err != nil {
			t.Fatalf("Ready on a migrated database: %v", err)
		}
		db := s.Store.DB
		if _, err := db.ExecContext(e.ctx, "INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES ('29991231000000', 99, CURRENT_TIMESTAMP)"); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Ready(e.ctx); err != nil {
			t.Fatalf("Ready with a newer build's migration applied: %v, want ready (rolling upgrade)", err)
		}
		var name string
		var group int64
		if err := db.QueryRowContext(e.ctx, "SELECT name, group_id FROM bun_migrations WHERE name < '2999' ORDER BY name DESC LIMIT 1").Scan(&name, &group); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(e.ctx, "DELETE FROM bun_migrations WHERE name = ?", name); err != nil {
			t.Fatal(err)
		}
		err := e.m.Ready(e.ctx)
		if master.KindOf(err) != master.KindState || !strings.Contains(master.Message(err), "lacks 1 migration(s)") ||
			!strings.Contains(master.Message(err), name) || !strings.Contains(master.Message(err), "schedulemaster migrate") {
			t.Fatalf("Ready without migration %s: %v, want a state error naming it and the fix", name, err)
		}
		if _, err := db.ExecContext(e.ctx, "INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES (?, ?, CURRENT_TIMESTAMP)", name, group); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Ready(e.ctx); err != nil {
			t.Fatalf("Ready once the migration is back: %v", err)
		}
	})
}
