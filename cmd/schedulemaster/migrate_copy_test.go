package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// copyFixtureAt is the time of the fixture rows: microseconds, which every
// engine keeps.
var copyFixtureAt = time.Date(2030, 5, 1, 12, 0, 0, 123456000, time.UTC)

// TestMigrateCopyBetweenEngines: a cluster's SQLite database (a master ran
// on it; then a row in every table) is copied by `migrate --from --to` to
// MariaDB and to PostgreSQL, and back from PostgreSQL to a new SQLite file:
// every table's count matches (the report says so), and times, JSON, NULLs
// and booleans read back as they were. A target with data is refused
// without --force; with it, it is emptied and filled. A master starts on
// the copy, its admin signs in, and new rows get fresh ids.
func TestMigrateCopyBetweenEngines(t *testing.T) {
	t.Parallel()
	ctx := storetest.Ctx(t)
	m := startMaster(t, "")
	tk := m.createTask(`{"title":"copied é ✓","type":"http","schedule":{"kind":"cron","cron":"0 0 * * * *"},
		"http":{"url":"http://127.0.0.1:1/x"},"timeout":"5s","selector":"pool=a"}`)
	if err := m.term(); err != nil {
		t.Fatal(err)
	}
	srcPath := filepath.Join(m.DataDir, "schedulemaster.db")
	fillEveryTable(t, ctx, "sqlite://"+srcPath)
	want := readCopyFixture(t, ctx, "sqlite://"+srcPath)

	for _, to := range []string{"mysql", "postgres"} {
		// One after the other: a copy locks the SQLite source as a master would.
		t.Run("sqlite to "+to, func(t *testing.T) {
			dst := storetest.FreshDSN(t, to) // skips without its DSN, fails with SM_TEST_REQUIRE_ALL=1
			r := runCLI(t, "", nil, "migrate", "--from", "sqlite://"+srcPath, "--to", dst, "--batch", "2")
			checkCopyReport(t, r, 0)
			if got := readCopyFixture(t, ctx, dst); got != want {
				t.Fatalf("read back from %s:\n got %s\nwant %s", to, got, want)
			}
			// Again: the target holds data now.
			r = runCLI(t, "", nil, "migrate", "--from", "sqlite://"+srcPath, "--to", dst)
			if r.code != exitFailure || !strings.Contains(r.stderr, "the target database holds data") || !strings.Contains(r.stderr, "--force") {
				t.Fatalf("copy to a database with data:\n%s", r)
			}
			checkCopyReport(t, runCLI(t, "", nil, "migrate", "--from", "sqlite://"+srcPath, "--to", dst, "--force"), 0)
			if got := readCopyFixture(t, ctx, dst); got != want {
				t.Fatalf("read back from %s after --force:\n got %s\nwant %s", to, got, want)
			}
			if to != "postgres" {
				return
			}

			// And back to a new SQLite file.
			back := filepath.Join(t.TempDir(), "back.db")
			checkCopyReport(t, runCLI(t, "", nil, "migrate", "--from", dst, "--to", "sqlite://"+back), 0)
			if got := readCopyFixture(t, ctx, "sqlite://"+back); got != want {
				t.Fatalf("read back from SQLite after PostgreSQL:\n got %s\nwant %s", got, want)
			}

			// A master on the copy: the admin signs in (startMaster does),
			// sees the task, and what it writes gets new ids.
			pm := startMaster(t, "", "--db", dst)
			if st, body := pm.api("GET", "/api/v1/tasks/"+tk.ID, ""); st != 200 || !strings.Contains(body, "copied é ✓") {
				t.Fatalf("the copied task on a master of the copy: %d %s", st, body)
			}
			pm.createTask(`{"title":"after the copy","type":"http","schedule":{"kind":"cron","cron":"0 0 * * * *"},
				"http":{"url":"http://127.0.0.1:1/y"},"timeout":"5s","selector":"pool=a"}`)
			if st, body := pm.api("POST", "/api/v1/tokens", `{"name":"after"}`); st != 201 {
				t.Fatalf("a token on a master of the copy (a new id): %d %s", st, body)
			}
		})
	}

	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"migrate", "--from", "sqlite://" + srcPath}, exitUsage, "flag --to: is required with --from"},
			{[]string{"migrate", "--from", "sqlite://" + srcPath, "--to", "sqlite://" + srcPath}, exitUsage, "name the same database"},
			{[]string{"migrate", "--from", "sqlite://" + srcPath, "--to", "postgres://u:secret@h:0/x"}, exitUsage, "flag --to: the PostgreSQL URL's port"},
			{[]string{"migrate", "--status", "--from", "sqlite://" + srcPath, "--to", "sqlite:///tmp/x.db"}, exitUsage, "flag --status: not with --from and --to"},
			{[]string{"migrate", "--force"}, exitUsage, "flag --force: only with --from and --to"},
			{[]string{"migrate", "--from", "sqlite://" + filepath.Join(t.TempDir(), "none.db"), "--to", "sqlite://" + filepath.Join(t.TempDir(), "t.db")},
				exitFailure, "--from: no database at"},
		} {
			r := runCLI(t, "", nil, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "secret") {
				t.Errorf("%v: want exit %d and %q (no password)\n%s", c.args, c.code, c.want, r)
			}
		}
	})
}

// checkCopyReport checks a copy's report: exit code, a line per table with
// equal counts, and the closing sentence.
func checkCopyReport(t *testing.T, r cliResult, code int) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stdout, "every table's count matches") {
		t.Fatalf("copy:\n%s", r)
	}
	t.Logf("copy report:\n%s", r.stdout)
	line := regexp.MustCompile(`(?m)^(\w+) +(\d+) +(\d+)  ok`)
	tables := map[string]bool{}
	for _, m := range line.FindAllStringSubmatch(r.stdout, -1) {
		if m[2] != m[3] {
			t.Errorf("table %s: %s rows in the source, %s in the target", m[1], m[2], m[3])
		}
		if n, _ := strconv.Atoi(m[2]); n == 0 {
			t.Errorf("table %s: no row copied, the test fills every table", m[1])
		}
		tables[m[1]] = true
	}
	for _, want := range []string{"tasks", "task_executors", "runs", "users", "api_tokens", "events", "settings", "delayed_tasks",
		"delayed_dispatches", "nodes", "sessions", "locks", "leases", "login_failures", "node_health", "pool_approvals", "run_grants",
		"projects", "project_members"} {
		if !tables[want] {
			t.Errorf("the report has no line for table %s:\n%s", want, r.stdout)
		}
	}
}

// openDSN opens (and migrates) the database of a --db value.
func openDSN(t *testing.T, ctx context.Context, raw string) *store.Store {
	t.Helper()
	dsn, err := store.ParseDSN(raw, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dsn, storetest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fillEveryTable adds rows to the tables a master's start and one task
// left empty, so that every table has something to copy: NULLs and set
// values, both booleans, JSON with non-ASCII text, times with microseconds.
func fillEveryTable(t *testing.T, ctx context.Context, raw string) {
	t.Helper()
	st := openDSN(t, ctx, raw)
	defer st.Close()
	at := copyFixtureAt
	three := 3
	pending := "pk-1"
	rows := []any{
		&store.Task{ID: "copy-task", Title: "fixture ✓", Type: "http", Status: store.TaskRunning,
			Spec: `{"http":{"url":"http://x/é","body":"{\"a\":[1,null,true]}"}}`, Keepers: `["kim"]`, Children: "[]",
			Selector: "pool=a", LastRunAt: at, LastResult: "success", RunCount: 7, CreatedBy: "admin", CreatedAt: at, UpdatedAt: at},
		&store.TaskExecutor{TaskID: "copy-task", Node: "w1"},
		&store.TaskExecutor{TaskID: "copy-task", Node: "w2", Selected: true},
		&store.Run{ID: "run-null", TaskID: "copy-task", Node: "w1", ScheduledAt: at, StartedAt: at, EndedAt: at.Add(time.Second),
			DurationMS: 1000, Result: "success", Attempt: 1, HTTPStatus: 200, Output: "ok ✓", Manual: true, CreatedAt: at},
		&store.Run{ID: "run-three", TaskID: "copy-task", Node: "w2", ScheduledAt: at, StartedAt: at, EndedAt: at, Result: "failed",
			Attempt: 2, ExitCode: &three, Output: "\uFFFD", BinaryOutput: true, CreatedAt: at, Covers: 4, TaskVersion: 3,
			WorkflowRun: "wr-1", WorkflowStep: "extract"},
		&store.APIToken{Name: "never expires", TokenHash: "h1", CreatedBy: "admin", CreatedAt: at, RevokedAt: at.Add(time.Hour)},
		&store.Claim{TaskID: "copy-task", FireAt: at, Node: "w1", CreatedAt: at, RunID: "run-null"},
		&store.DelayedTask{ID: "d-done", SourceApp: "app", Topic: "t", ContentKey: "k", Status: store.DelayedSuccess, DueAt: at, NextAt: at,
			NotifyURL: "http://x/cb", NotifyBody: `{"n":1}`, ContentType: "application/json", Executors: `["w1"]`, Keepers: "[]",
			Late: true, CreatedAt: at, UpdatedAt: at, FiredAt: at, FinishedAt: at},
		&store.DelayedTask{ID: "d-pending", SourceApp: "app", Topic: "t", ContentKey: "k2", PendingKey: &pending, Status: store.DelayedPending,
			DueAt: at, NextAt: at, NotifyURL: "http://x/cb", ContentType: "text/plain", Executors: "[]", Keepers: "[]", CreatedAt: at, UpdatedAt: at},
		&store.DelayedDispatch{DelayedID: "d-done", Seq: 1, Attempt: 1, Node: "w1", SentAt: at, Outcome: "success"},
		&store.HealthSample{Node: "w1", At: at, LatencyMS: 12, OK: false, Reason: "refused"},
		&store.PoolApproval{Label: "pool=a", CreatedBy: "admin", CreatedAt: at},
		&store.RunGrant{TaskID: "copy-task", Node: "w3", CreatedAt: at},
		&store.LoginFailure{Key: "ip:127.0.0.1", Failures: 2, WindowStart: at},
		&store.Session{ID: "s-fixture", Username: "admin", CreatedAt: at, ExpiresAt: at.Add(time.Hour)},
		&store.ProjectMember{ProjectID: store.DefaultProjectID, Username: "admin", Role: "operator", AddedBy: "admin", AddedAt: at},
		&store.Workflow{ID: "wf-1", ProjectID: store.DefaultProjectID, Title: "etl ✓", Key: "etl", Definition: `{"title":"etl ✓","steps":[]}`,
			Version: 2, NextFire: &at, Paused: true, CreatedBy: "admin", CreatedAt: at, UpdatedAt: at},
		&store.Backfill{ID: "bf-1", ProjectID: store.DefaultProjectID, WorkflowID: "wf-1", Title: "etl ✓", From: at.Add(-time.Hour), To: at,
			MaxConcurrent: 3, NewestFirst: true, State: store.BackfillPaused, Total: 1, CreatedBy: "admin", CreatedAt: at, UpdatedAt: at},
		&store.WorkflowRun{ID: "wr-1", WorkflowID: "wf-1", ProjectID: store.DefaultProjectID, Status: store.WorkflowFailed, LogicalTime: at,
			StartedAt: at, EndedAt: at.Add(time.Second), StartedBy: "admin", Trigger: "manual", Definition: "{}", Params: `{"day":"é"}`, UpdatedAt: at,
			Note: "missed ✓", BackfillID: "bf-1"},
		&store.WorkflowShard{RunID: "wr-1", Step: "fan", Node: "w2", State: store.StepLost, DispatchID: "d-1", TaskRun: "run-three",
			Attempt: 1, Output: "lost ✓", StartedAt: at, UpdatedAt: at},
		&store.WorkflowVersion{WorkflowID: "wf-1", Version: 2, Title: "etl ✓", Definition: `{"title":"etl ✓","steps":[]}`,
			CreatedAt: at, CreatedBy: "admin", Via: "restore", Note: "back ✓"},
		&store.Connection{ID: "conn-1", ProjectID: store.DefaultProjectID, Name: "bus", Kind: "nats", Address: "127.0.0.1:4222",
			User: "ü", SecretEnc: "v1:c2VhbGVk", TLS: `{"enabled":true,"server_name":"nats.local"}`, Options: "{}", Description: "events ✓",
			Version: 3, CreatedBy: "admin", CreatedAt: at, UpdatedAt: at},
		&store.WorkflowStep{RunID: "wr-1", Name: "extract", TaskID: "copy-task", State: store.StepFailed, DispatchID: "run-three",
			TaskRun: "run-three", Node: "w2", Attempt: 2, Output: "\uFFFD", EndedAt: at, UpdatedAt: at, Redispatches: 1, AvoidNodes: ",w1,"},
	}
	for _, r := range rows {
		if _, err := st.DB.NewInsert().Model(r).Exec(ctx); err != nil {
			t.Fatalf("insert %T: %v", r, err)
		}
	}
}

// readCopyFixture reads the fixture's values back as one comparable line.
func readCopyFixture(t *testing.T, ctx context.Context, raw string) string {
	t.Helper()
	st := openDSN(t, ctx, raw)
	defer st.Close()
	var b strings.Builder
	get := func(model any, q func(*bun.SelectQuery) *bun.SelectQuery) {
		if err := q(st.DB.NewSelect().Model(model)).Scan(ctx); err != nil {
			t.Fatalf("read %T from %s: %v", model, raw, err)
		}
	}
	ts := func(x time.Time) string {
		if x.IsZero() {
			return "NULL"
		}
		return x.UTC().Format(time.RFC3339Nano)
	}
	var task store.Task
	get(&task, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("id = ?", "copy-task") })
	b.WriteString("task " + task.Title + " " + task.Spec + " " + task.Keepers + " " + task.Selector + " " + ts(task.LastRunAt) +
		" " + strconv.FormatInt(task.RunCount, 10) + " " + task.Status.String())
	var execs []store.TaskExecutor
	get(&execs, func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("task_id = ?", "copy-task").OrderExpr("node ASC")
	})
	for _, e := range execs {
		b.WriteString(" | exec " + e.Node + " " + strconv.FormatBool(e.Selected))
	}
	var runs []store.Run
	get(&runs, func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("task_id = ?", "copy-task").OrderExpr("id ASC")
	})
	for _, r := range runs {
		code := "NULL"
		if r.ExitCode != nil {
			code = strconv.Itoa(*r.ExitCode)
		}
		b.WriteString(" | run " + r.ID + " " + ts(r.StartedAt) + " " + ts(r.EndedAt) + " " + code + " " + strconv.FormatBool(r.Manual) +
			" " + strconv.FormatBool(r.BinaryOutput) + " " + r.Output + " " + strconv.Itoa(r.Covers) + " delayed=" + r.DelayedID +
			" v" + strconv.Itoa(r.TaskVersion) + " " + r.WorkflowRun + "/" + r.WorkflowStep)
	}
	var step store.WorkflowStep
	get(&step, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("run_id = ?", "wr-1") })
	b.WriteString(" | step " + step.Name + " " + step.State + " " + ts(step.StartedAt) + " " + ts(step.EndedAt) + " " + step.Output +
		" " + strconv.Itoa(step.Redispatches) + step.AvoidNodes)
	var wrun store.WorkflowRun
	get(&wrun, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("id = ?", "wr-1") })
	b.WriteString(" | workflow run " + wrun.Status + " " + ts(wrun.EndedAt) + " " + wrun.Params + " " + wrun.Note + " " + wrun.BackfillID)
	var conn store.Connection
	get(&conn, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("id = ?", "conn-1") })
	b.WriteString(" | connection " + conn.Name + " " + conn.User + " " + conn.SecretEnc + " " + conn.TLS + " " + conn.Description +
		" v" + strconv.FormatInt(conn.Version, 10) + " " + ts(conn.UpdatedAt))
	var wf store.Workflow
	get(&wf, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("id = ?", "wf-1") })
	b.WriteString(" | workflow " + ts(*wf.NextFire) + " " + strconv.FormatBool(wf.Paused))
	var sh store.WorkflowShard
	get(&sh, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("run_id = ?", "wr-1") })
	b.WriteString(" | shard " + sh.Node + " " + sh.State + " " + ts(sh.StartedAt) + " " + ts(sh.EndedAt) + " " + sh.Output)
	var wv store.WorkflowVersion
	get(&wv, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("workflow_id = ?", "wf-1") })
	b.WriteString(" | workflow version " + strconv.Itoa(wv.Version) + " " + ts(wv.CreatedAt) + " " + wv.Via + " " + wv.Note)
	var bf store.Backfill
	get(&bf, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("id = ?", "bf-1") })
	b.WriteString(" | backfill " + ts(bf.From) + " " + ts(bf.To) + " " + bf.State + " " + strconv.FormatBool(bf.NewestFirst) + " " + ts(bf.EndedAt))
	var tok store.APIToken
	get(&tok, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("token_hash = ?", "h1") })
	b.WriteString(" | token " + ts(tok.LastUsedAt) + " " + ts(tok.RevokedAt))
	var ds []store.DelayedTask
	get(&ds, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("source_app = ?", "app").OrderExpr("id ASC") })
	for _, d := range ds {
		key := "NULL"
		if d.PendingKey != nil {
			key = *d.PendingKey
		}
		b.WriteString(" | delayed " + d.ID + " " + key + " " + strconv.FormatBool(d.Late) + " " + ts(d.FiredAt) + " " + ts(d.DispatchedAt) + " " + d.NotifyBody)
	}
	var hs store.HealthSample
	get(&hs, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("node = ?", "w1") })
	b.WriteString(" | health " + strconv.FormatBool(hs.OK) + " " + ts(hs.At))
	var lf store.LoginFailure
	get(&lf, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("k = ?", "ip:127.0.0.1") })
	b.WriteString(" | login " + ts(lf.WindowStart) + " " + ts(lf.BlockedUntil))
	var users []store.User
	get(&users, func(q *bun.SelectQuery) *bun.SelectQuery { return q.OrderExpr("id ASC") })
	for _, u := range users {
		b.WriteString(" | user " + strconv.FormatInt(u.ID, 10) + " " + u.Username + " " + u.Role + " " + strconv.FormatBool(u.Disabled) + " " + u.PasswordHash)
	}
	var settings []store.Setting
	get(&settings, func(q *bun.SelectQuery) *bun.SelectQuery { return q.OrderExpr("name ASC") })
	for _, s := range settings {
		b.WriteString(" | setting " + s.Name + "=" + s.Value)
	}
	return b.String()
}
