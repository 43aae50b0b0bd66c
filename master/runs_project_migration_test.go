package master_test

import (
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// TestRunsProjectMigrationFillsEveryRunsProject: runs stored before runs
// carried their project get their task's or delayed task's project, and a
// project's run list shows them; a task moved later takes its runs along.
func TestRunsProjectMigrationFillsEveryRunsProject(t *testing.T) {
	t.Parallel()
	for _, dialect := range storetest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := storetest.Ctx(t)
			st := migratedUpTo(t, dialect, "20261201100000")
			now := time.Now().UTC().Truncate(time.Second)
			run := "INSERT INTO runs (id, task_id, delayed_id, node, scheduled_at, started_at, ended_at, result, output, created_at) VALUES (?, ?, ?, 'w1', ?, ?, ?, 'success', 'ok', ?)"
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{"INSERT INTO projects (id, name, created_at, updated_at) VALUES (2, 'billing', ?, ?)", []any{now, now}},
				{"INSERT INTO tasks (id, project_id, title, type, status, spec, keepers, children, created_by, created_at, updated_at) VALUES ('t-bill', 2, 'bill', 'http', 0, '{}', '[]', '[]', 'admin', ?, ?)", []any{now, now}},
				{"INSERT INTO tasks (id, title, type, status, spec, keepers, children, created_by, created_at, updated_at) VALUES ('t-def', 'def', 'http', 0, '{}', '[]', '[]', 'admin', ?, ?)", []any{now, now}},
				{"INSERT INTO delayed_tasks (id, project_id, source_app, topic, content_key, status, due_at, next_at, notify_url, notify_body, content_type, executors, keepers, created_at, updated_at) VALUES ('d-bill', 2, 'shop', 'remind', 'o-1', 'done', ?, ?, 'http://127.0.0.1:1/h', '{}', 'application/json', '[]', '[]', ?, ?)",
					[]any{now, now, now, now}},
				{run, []any{"r-bill", "t-bill", nil, now, now, now, now}},
				{run, []any{"r-def", "t-def", nil, now, now, now, now}},
				{run, []any{"r-dbill", "d-bill", "d-bill", now, now, now, now}},
				{run, []any{"r-gone", "t-unknown", nil, now, now, now, now}},
			} {
				if _, err := st.DB.ExecContext(ctx, q.sql, q.args...); err != nil {
					t.Fatalf("old data: %s: %v", q.sql, err)
				}
			}
			applied, err := st.Migrate(ctx, storetest.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(applied) == 0 || !strings.HasPrefix(applied[0], "20261201100001") {
				t.Fatalf("applied %v, want the runs' project migration first", applied)
			}
			want := map[string]int64{"r-bill": 2, "r-def": 1, "r-dbill": 2, "r-gone": 1}
			for id, p := range want {
				var got int64
				if err := st.DB.NewRaw("SELECT project_id FROM runs WHERE id = ?", id).Scan(ctx, &got); err != nil || got != p {
					t.Errorf("run %s in project %d (%v), want %d", id, got, err, p)
				}
			}
			m := master.New(master.Config{Identity: "master", ClusterKey: clusterKey, AdvertiseHost: "127.0.0.1:1"}, st, storetest.Logger(t))
			runs, n, err := m.Reads().SearchRuns(ctx, master.RunFilter{Projects: []int64{2}})
			if err != nil || n != 2 || len(runs) != 2 {
				t.Fatalf("billing's runs: %d %v", n, err)
			}
			// New runs get their project on the way in; a moved task takes
			// its runs along.
			if _, err := store.InsertRuns(ctx, st.DB, []store.Run{{ID: "r-new", TaskID: "t-bill", Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "success", Attempt: 1}}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.InsertDelayedRuns(ctx, st.DB, []store.Run{{ID: "r-dnew", TaskID: "d-bill", DelayedID: "d-bill", Node: "w1", ScheduledAt: now, StartedAt: now, EndedAt: now, Result: "failed", Attempt: 1}}); err != nil {
				t.Fatal(err)
			}
			tk, err := store.GetTask(ctx, st.DB, "t-bill")
			if err != nil {
				t.Fatal(err)
			}
			tk.ProjectID = store.DefaultProjectID
			if err := store.UpdateTask(ctx, st.DB, tk, tk.Version); err != nil {
				t.Fatal(err)
			}
			if _, n, err = m.Reads().SearchRuns(ctx, master.RunFilter{Projects: []int64{2}}); err != nil || n != 2 {
				t.Fatalf("billing's runs after its task moved: %d %v, want the delayed task's two", n, err)
			}
			if _, n, err = m.Reads().SearchRuns(ctx, master.RunFilter{Projects: []int64{1}}); err != nil || n != 4 {
				t.Fatalf("default's runs after the task moved in: %d %v, want 4", n, err)
			}
		})
	}
}
