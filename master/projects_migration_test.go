package master_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/uptrace/bun/migrate"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/migrations"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// lastBeforeProjects is the last migration of the release before projects.
const lastBeforeProjects = "20261128100001"

// TestProjectsMigrationMovesExistingDataToDefault starts from a database of
// the release before projects (its migrations only) holding a task with an
// executor, runs of it, a delayed task, an API token and events; migrating
// to this release puts all of it in project "default", which allows every
// pool, and it reads as before: a viewer of every project sees it, a user
// of no project sees nothing and is told the task does not exist.
func TestProjectsMigrationMovesExistingDataToDefault(t *testing.T) {
	t.Parallel()
	for _, dialect := range storetest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := storetest.Ctx(t)
			st := migratedUpTo(t, dialect, lastBeforeProjects)
			if _, err := st.DB.ExecContext(ctx, "SELECT project_id FROM tasks"); err == nil {
				t.Fatal("the old schema already has tasks.project_id")
			}

			// Data of the old release, written as it wrote it.
			now := time.Now().UTC().Truncate(time.Second)
			spec := `{"id":"t-old","title":"nightly export","type":"http","schedule":{"kind":"interval","every":"1h"},"http":{"method":"GET","url":"http://127.0.0.1:1/x"},"timeout":"30s"}`
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{"INSERT INTO nodes (name, type, host, protocol, created_at, updated_at) VALUES (?, 'worker', '127.0.0.1:1', 'http', ?, ?)", []any{"w1", now, now}},
				{"INSERT INTO tasks (id, title, type, status, spec, keepers, children, created_by, created_at, updated_at) VALUES ('t-old', 'nightly export', 'http', 0, ?, '[]', '[]', 'admin', ?, ?)", []any{spec, now, now}},
				{"INSERT INTO task_executors (task_id, node) VALUES ('t-old', 'w1')", nil},
				{"INSERT INTO runs (id, task_id, node, scheduled_at, started_at, ended_at, result, output, created_at) VALUES ('r-old-1', 't-old', 'w1', ?, ?, ?, 'success', 'ok', ?)", []any{now, now, now, now}},
				{"INSERT INTO runs (id, task_id, node, scheduled_at, started_at, ended_at, result, output, created_at) VALUES ('r-old-2', 't-old', 'w1', ?, ?, ?, 'failed', 'boom', ?)", []any{now, now, now, now}},
				{"INSERT INTO delayed_tasks (id, source_app, topic, content_key, pending_key, status, due_at, next_at, notify_url, notify_body, content_type, executors, keepers, created_at, updated_at) VALUES ('d-old', 'shop', 'remind', 'order-1', ?, 'pending', ?, ?, 'http://127.0.0.1:1/hook', '{}', 'application/json', '[]', '[]', ?, ?)",
					[]any{store.DelayedPendingKey(store.DefaultProjectID, "shop", "remind", "order-1"), now.Add(time.Hour), now.Add(time.Hour), now, now}},
				{"INSERT INTO users (username, password_hash, role, created_at, updated_at) VALUES ('vera', 'x', 'viewer', ?, ?)", []any{now, now}},
				{"INSERT INTO api_tokens (name, token_hash, created_by, created_at) VALUES ('ci', 'hash-old', 'vera', ?)", []any{now}},
				{"INSERT INTO events (at, actor, action, target_type, target, outcome) VALUES (?, 'admin', 'task.create', 'task', 't-old', 'ok')", []any{now}},
			} {
				if _, err := st.DB.ExecContext(ctx, q.sql, q.args...); err != nil {
					t.Fatalf("old data: %s: %v", q.sql, err)
				}
			}

			// This release.
			applied, err := st.Migrate(ctx, storetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(applied) == 0 || !strings.HasPrefix(applied[0], "20261129100000") {
				t.Fatalf("applied %v, want the projects migration first", applied)
			}
			var tasksIn, delayedIn int64
			if err := st.DB.NewRaw("SELECT project_id FROM tasks WHERE id = 't-old'").Scan(ctx, &tasksIn); err != nil {
				t.Fatal(err)
			}
			if err := st.DB.NewRaw("SELECT project_id FROM delayed_tasks WHERE id = 'd-old'").Scan(ctx, &delayedIn); err != nil {
				t.Fatal(err)
			}
			if tasksIn != store.DefaultProjectID || delayedIn != store.DefaultProjectID {
				t.Fatalf("task in project %d, delayed task in %d, want %d", tasksIn, delayedIn, store.DefaultProjectID)
			}
			p, err := store.GetProjectByID(ctx, st.DB, store.DefaultProjectID)
			if err != nil || p.Name != master.DefaultProject || p.Pools != master.AllPools {
				t.Fatalf("project 1: %+v %v, want default allowing every pool", p, err)
			}

			m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1"}, st, storetest.Logger(t))
			viewer := master.WithPrincipal(ctx, &master.Principal{Name: "vera", Role: master.RoleViewer})
			tasks, total, err := m.Tasks().List(viewer, master.TaskFilter{})
			if err != nil || total != 1 || tasks[0].ID != "t-old" || tasks[0].Project != master.DefaultProject || tasks[0].Executors[0] != "w1" {
				t.Fatalf("a viewer of every project lists %d: %+v %v", total, tasks, err)
			}
			runs, n, err := m.Reads().SearchRuns(viewer, master.RunFilter{TaskID: "t-old"})
			if err != nil || n != 2 || len(runs) != 2 {
				t.Fatalf("runs of the old task: %d %v", n, err)
			}
			d, err := m.Delayed().GetDelayed(viewer, "d-old")
			if err != nil || d.Project != master.DefaultProject {
				t.Fatalf("old delayed task: %+v %v", d, err)
			}
			evs, _, err := m.Reads().ListEvents(viewer, master.EventFilter{})
			if err != nil || len(evs) == 0 {
				t.Fatalf("old events: %d %v", len(evs), err)
			}
			// The old token acts as its owner, wherever the owner may act.
			var tokProject *int64
			if err := st.DB.NewRaw("SELECT project_id FROM api_tokens WHERE name = 'ci'").Scan(ctx, &tokProject); err != nil || tokProject != nil {
				t.Fatalf("old token's project: %v %v, want NULL", tokProject, err)
			}

			nobody := master.WithPrincipal(ctx, &master.Principal{Name: "newcomer", Role: master.RoleNone})
			if _, total, err := m.Tasks().List(nobody, master.TaskFilter{}); err != nil || total != 0 {
				t.Fatalf("a member of no project lists %d tasks (%v), want 0", total, err)
			}
			if _, err := m.Tasks().Get(nobody, "t-old"); master.KindOf(err) != master.KindNotFound {
				t.Fatalf("a member of no project reads the task: %v, want not found", err)
			}
			if _, total, err := m.Reads().SearchRuns(nobody, master.RunFilter{}); err != nil || total != 0 {
				t.Fatalf("a member of no project sees %d runs (%v), want 0", total, err)
			}
		})
	}
}

// migratedUpTo is a store on a fresh database of dialect with the
// migrations up to last (a migration's name prefix) applied, as a release
// that ended there left it.
func migratedUpTo(t *testing.T, dialect, last string) *store.Store {
	t.Helper()
	ctx := storetest.Ctx(t)
	dsn, err := store.ParseDSN(storetest.FreshDSN(t, dialect), "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Connect(ctx, dsn, storetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	old := fstest.MapFS{}
	err = fs.WalkDir(migrations.FS, dialect, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) > last+"_~" {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		old[filepath.Base(path)] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(old); err != nil {
		t.Fatal(err)
	}
	mg := migrate.NewMigrator(st.DB, ms, migrate.WithMarkAppliedOnSuccess(true))
	if err := mg.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mg.Migrate(ctx); err != nil {
		t.Fatalf("schema up to %s: %v", last, err)
	}
	return st
}
