package store_test

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/migrations"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// embeddedMigrations are the names (file name less ".up.sql") of a dialect's migrations.
func embeddedMigrations(t *testing.T, dialect string) []string {
	t.Helper()
	files, err := fs.Glob(migrations.FS, dialect+"/*.up.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded %s migrations: %v %v", dialect, files, err)
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".up.sql"))
	}
	slices.Sort(out)
	return out
}

// TestMigrationStatus: a database never migrated has every migration
// pending and reading that changes nothing; Migrate applies them all once;
// a row a newer build wrote shows as unknown; a missing row as pending.
func TestMigrationStatus(t *testing.T) {
	t.Parallel()
	for _, dialect := range storetest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := storetest.Ctx(t)
			dsn, err := store.ParseDSN(storetest.FreshDSN(t, dialect), "")
			if err != nil {
				t.Fatal(err)
			}
			s, err := store.Connect(ctx, dsn, storetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := embeddedMigrations(t, dialect)

			st, err := s.MigrationStatus(ctx)
			if err != nil {
				t.Fatalf("status of a fresh database: %v", err)
			}
			if got := st.Pending(); !slices.Equal(got, want) || len(st.Unknown) != 0 {
				t.Fatalf("fresh database: pending %v unknown %v, want all %d pending", got, st.Unknown, len(want))
			}
			// Reading the status created nothing: the table is still missing.
			var n int
			q := "SELECT count(*) FROM sqlite_master WHERE name = 'bun_migrations'"
			switch dialect {
			case string(store.MySQL):
				q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'bun_migrations'"
			case string(store.Postgres):
				q = "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'bun_migrations'"
			}
			if err := s.DB.QueryRowContext(ctx, q).Scan(&n); err != nil || n != 0 {
				t.Fatalf("after a status read: bun_migrations tables %d (%v), want none", n, err)
			}

			applied, err := s.Migrate(ctx, storetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(applied, want) {
				t.Fatalf("Migrate applied %v, want %v", applied, want)
			}
			if again, err := s.Migrate(ctx, storetest.Logger(t)); err != nil || len(again) != 0 {
				t.Fatalf("second Migrate: %v %v, want nothing applied", again, err)
			}
			st, err = s.MigrationStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Pending()) != 0 || len(st.Known) != len(want) || !st.Known[0].Applied() {
				t.Fatalf("after Migrate: %+v", st)
			}

			// A newer build's migration, and one of ours gone missing.
			if _, err := s.DB.ExecContext(ctx, "INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES ('29991231000000', 99, CURRENT_TIMESTAMP)"); err != nil {
				t.Fatal(err)
			}
			last := want[len(want)-1]
			if _, err := s.DB.ExecContext(ctx, "DELETE FROM bun_migrations WHERE name = ?", strings.SplitN(last, "_", 2)[0]); err != nil {
				t.Fatal(err)
			}
			st, err = s.MigrationStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Pending(); !slices.Equal(got, []string{last}) {
				t.Errorf("pending %v, want [%s]", got, last)
			}
			if len(st.Unknown) != 1 || st.Unknown[0].Name != "29991231000000" || st.Unknown[0].AppliedAt.IsZero() {
				t.Errorf("unknown %+v, want the newer build's migration with its time", st.Unknown)
			}
		})
	}
}

// TestEveryDialectHasTheSameMigrations: a migration added for one engine
// and not ported to the others fails here, before any database is needed.
func TestEveryDialectHasTheSameMigrations(t *testing.T) {
	want := embeddedMigrations(t, string(store.SQLite))
	for _, dialect := range storetest.Dialects {
		if got := embeddedMigrations(t, dialect); !slices.Equal(got, want) {
			t.Errorf("%s migrations %v, want the same names as sqlite's %v", dialect, got, want)
		}
	}
}
