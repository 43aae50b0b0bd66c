package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// scaleSizes is the estate of the scale scenario.
type scaleSizes struct {
	tasks, runs, delayed, events int
}

// scaleScenario fills a database with a large estate (100,000 tasks,
// 1,000,000 runs, 1,000,000 pending delayed tasks) and times every list page
// and the dashboard of the console and the API on it: p50 and p99 of
// repeated requests, served in-process, on SQLite and on each server given.
func (b *bench) scaleScenario(ctx context.Context) []row {
	sz := scaleSizes{tasks: b.pick(100_000, 2_000), runs: b.pick(1_000_000, 10_000), delayed: b.pick(1_000_000, 10_000), events: b.pick(100_000, 2_000)}
	iters := b.pick(100, 5)
	var rows []row
	label := fmt.Sprintf("%s tasks, %s runs, %s pending delayed", fmtInt(sz.tasks), fmtInt(sz.runs), fmtInt(sz.delayed))
	log, _ := b.newLogger()
	{
		st, err := b.scaleSQLite(ctx, log)
		if err != nil {
			return []row{errRow("scale, SQLite", err)}
		}
		rows = append(rows, b.scaleOn(ctx, st, "SQLite, "+label, sz, iters)...)
		st.Close()
	}
	for _, srv := range b.servers() {
		if srv.key == "galera" {
			continue
		}
		name := srv.label + ", " + label
		if srv.dsns == nil {
			rows = append(rows, row{"scale, " + srv.label, "skipped: " + srv.missing, "-", Info})
			continue
		}
		open := srv.open
		if srv.key == "mysql" && b.opt.ScaleMySQL != "" {
			open = func(ctx context.Context, log *slog.Logger) (*store.Store, func(), error) {
				return openKeptMySQL(ctx, srv.dsns[0], b.opt.ScaleMySQL, log)
			}
		}
		st, cleanup, err := open(ctx, log)
		if err != nil {
			rows = append(rows, errRow("scale, "+name, err))
			continue
		}
		rows = append(rows, b.scaleOn(ctx, st, name, sz, iters)...)
		cleanup()
	}
	return rows
}

// scaleSQLite opens the scale scenario's SQLite store: -scale-db, or a new
// file in the run's directory.
func (b *bench) scaleSQLite(ctx context.Context, log *slog.Logger) (*store.Store, error) {
	if b.opt.ScaleDB == "" {
		dir := filepath.Join(b.tmp, "scale")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return openSQLite(ctx, dir, log)
	}
	dsn, err := store.ParseDSN("sqlite://"+b.opt.ScaleDB, "")
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, dsn, log)
}

// openKeptMySQL opens (creating it if need be) the MariaDB database name on
// the server of raw, migrated; it is kept at the end, for the next run.
func openKeptMySQL(ctx context.Context, raw, name string, log *slog.Logger) (*store.Store, func(), error) {
	if !keptName.MatchString(name) {
		return nil, nil, fmt.Errorf("-scale-mysql-db %q: want letters, digits and _ only, at most 64", name)
	}
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(raw, "mysql://"))
	if err != nil {
		return nil, nil, err
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	db.Close()
	if err != nil {
		return nil, nil, err
	}
	cfg.DBName = name
	dsn, err := store.ParseDSN("mysql://"+cfg.FormatDSN(), "")
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, dsn, log)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { st.Close() }, nil
}

// keptName is a database name -scale-mysql-db accepts.
var keptName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// scaleOn seeds st (unless a reused -scale-db holds the estate) and times
// the pages.
func (b *bench) scaleOn(ctx context.Context, st *store.Store, label string, sz scaleSizes, iters int) []row {
	t0 := time.Now()
	var hot string
	err := st.DB.NewSelect().Table("tasks").Column("id").Where("title = ?", "ping billing 00000").Limit(1).Scan(ctx, &hot)
	reuse := err == nil && (b.opt.ScaleDB != "" || b.opt.ScaleMySQL != "")
	if !reuse {
		if hot, err = seedScale(ctx, st, sz); err != nil {
			return []row{errRow("scale, "+label, err)}
		}
	}
	rows := []row{{"scale, " + label, fmt.Sprintf("seeded in %s", fmtDur(time.Since(t0))), "-", Info}}
	if reuse {
		rows[0].Figure = "reused the estate seeded before (-scale-db, -scale-mysql-db)"
	} else if err := addAdmin(ctx, st.DB, benchUser, benchPassword); err != nil {
		return append(rows, errRow("scale, "+label, err))
	}
	log, _ := b.newLogger()
	m := master.New(master.Config{Identity: "master", ClusterKey: benchClusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour}}, st, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		return append(rows, errRow("scale, "+label, err))
	}
	srv := httptest.NewServer(h)
	cookie, err := login(srv.URL, benchUser, benchPassword)
	srv.Close()
	if err != nil {
		return append(rows, errRow("scale, "+label, err))
	}
	type page struct {
		name, path string
		hx         bool
	}
	pages := []page{
		{"dashboard (GET /dashboard)", "/dashboard", false},
		{"dashboard live part (htmx poll)", "/dashboard/live", true},
		{"task list (GET /tasks)", "/tasks", false},
		{"task list, running only", "/tasks?status=1", false},
		{"task list, title search", "/tasks?title=billing+0421", false},
		{"task list, node filter", "/tasks?node=worker-00003", false},
		{"task list, page 1,000 (offset 50,000)", fmt.Sprintf("/tasks?offset=%d", min(50_000, sz.tasks/2)), false},
		{"task rows fragment (htmx poll)", "/tasks/rows", true},
		{"task page with its runs", "/tasks/" + hot, false},
		{"run list (GET /runs)", "/runs", false},
		{"run list, failed only", "/runs?result=failed", false},
		{"delayed list (GET /delayed)", "/delayed", false},
		{"delayed list, pending of one topic", "/delayed?status=pending&topic=far", false},
		{"event log (GET /events)", "/events", false},
		{"event log, one actor", "/events?actor=smbench-7", false},
		{"API task list", "/api/v1/tasks", false},
		{"API task list, running only", "/api/v1/tasks?status=1", false},
		{"API run search", "/api/v1/runs", false},
		{"API delayed list", "/api/v1/delayed?status=pending", false},
		{"API event list", "/api/v1/events", false},
	}
	for _, p := range pages {
		settle()
		p50, p99, done, size, err := timePage(h, p.path, cookie, p.hx, iters)
		if err != nil {
			rows = append(rows, errRow("  "+p.name, err))
			continue
		}
		fig := fmt.Sprintf("p50 %s, p99 %s (%d requests, %s KiB)", fmtDur(p50), fmtDur(p99), done, fmtInt(size>>10))
		fmt.Fprintf(os.Stderr, "smbench: scale: %s: %s: %s\n", label, p.name, fig)
		rows = append(rows, row{"  " + p.name, fig, "p99 <= 50 ms", verdict(p99 <= 50*time.Millisecond)})
	}
	return rows
}

// timePage serves path in-process n times after a warm-up and returns the
// median and p99 and the body size. A 503 (the database deadline on a
// starved machine) is asked again up to three times.
func timePage(h http.Handler, path, cookie string, hx bool, n int) (p50, p99 time.Duration, done, size int, err error) {
	once := func() (time.Duration, error) {
		for try := 0; ; try++ {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Header.Set("Cookie", cookie)
			if hx {
				req.Header.Set("HX-Request", "true")
			}
			rec := httptest.NewRecorder()
			t0 := time.Now()
			h.ServeHTTP(rec, req)
			d := time.Since(t0)
			if rec.Code == http.StatusOK {
				size = rec.Body.Len()
				return d, nil
			}
			if rec.Code != http.StatusServiceUnavailable || try == 3 {
				return 0, fmt.Errorf("GET %s: %d %.200s", path, rec.Code, rec.Body.String())
			}
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := once(); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	ds := make([]time.Duration, 0, n)
	// A slow page stops after scaleBudget and at least 5 requests: its
	// figure is then over fewer requests, said in the row.
	var spent time.Duration
	for i := 0; i < n && (i < 5 || spent < scaleBudget); i++ {
		d, err := once()
		if err != nil {
			return 0, 0, 0, 0, err
		}
		ds, spent = append(ds, d), spent+d
	}
	s := sortDurations(ds)
	return percentile(s, 0.5), percentile(s, 0.99), len(ds), size, nil
}

// scaleBudget bounds the time spent timing one page.
const scaleBudget = 15 * time.Second

// seedScale writes the estate straight into the database, in large
// batches: tasks on 20 workers (a quarter running, paused, stopped each,
// and some running tasks with no running executor), runs over the last 14
// days (one in 17 failed), pending delayed tasks due in the next month and
// events. It returns a task with many runs.
func seedScale(ctx context.Context, st *store.Store, sz scaleSizes) (string, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	var nodes []store.Node
	var names []string
	for i := 0; i < 20; i++ {
		nd := workerNode(fmt.Sprintf("worker-%05d", i), fmt.Sprintf("10.0.0.%d:30001", i+1), "boot"+randHex(4))
		if i == 19 {
			nd.Status = store.StatusOffline
		}
		nodes = append(nodes, nd)
		names = append(names, nd.Name)
	}
	if err := insertNodes(ctx, st.DB, nodes); err != nil {
		return "", err
	}
	statuses := []store.TaskStatus{store.TaskRunning, store.TaskRunning, store.TaskPaused, store.TaskStopped}
	ids := make([]string, sz.tasks)
	for done := 0; done < sz.tasks; {
		n := min(500, sz.tasks-done)
		tasks := make([]store.Task, 0, n)
		execs := make([]store.TaskExecutor, 0, n)
		for i := done; i < done+n; i++ {
			def := httpTask(uuid.NewString(), fmt.Sprintf("%d %d * * * *", i%60, (i/60)%60), "http://billing.internal:8080")
			def.Title = fmt.Sprintf("ping billing %05d", i)
			t, err := taskRow(def, statuses[i%4], nil)
			if err != nil {
				return "", err
			}
			t.CreatedAt = now.Add(-time.Duration(sz.tasks-i) * time.Second)
			t.UpdatedAt = t.CreatedAt
			ids[i] = t.ID
			tasks = append(tasks, *t)
			execs = append(execs, store.TaskExecutor{TaskID: t.ID, Node: names[i%len(names)]})
		}
		err := st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewInsert().Model(&tasks).Exec(ctx); err != nil {
				return err
			}
			_, err := tx.NewInsert().Model(&execs).Exec(ctx)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("insert tasks: %w", err)
		}
		done += n
	}
	code := 0
	span := 14 * 24 * time.Hour
	for done := 0; done < sz.runs; {
		n := min(1000, sz.runs-done)
		runs := make([]store.Run, 0, n)
		for i := done; i < done+n; i++ {
			task := ids[0]
			if i%4 != 0 {
				task = ids[i%len(ids)]
			}
			started := now.Add(-span + time.Duration(int64(span)/int64(sz.runs)*int64(i)))
			res := protocol.ResultSuccess
			if i%17 == 0 {
				res = protocol.ResultFailed
			}
			runs = append(runs, store.Run{ID: uuid.NewString(), TaskID: task, ProjectID: store.DefaultProjectID, Node: names[i%19], ScheduledAt: started.Truncate(time.Second),
				StartedAt: started, EndedAt: started.Add(12 * time.Millisecond), DurationMS: 12, Result: res, Attempt: 1,
				HTTPStatus: 200, ExitCode: &code, Output: `{"status":"ok","latency_ms":12}`, CreatedAt: started})
		}
		err := st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.NewInsert().Model(&runs).Exec(ctx)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("insert runs: %w", err)
		}
		done += n
	}
	if err := insertFarDelayed(ctx, st.DB, sz.delayed, "http://billing.internal:8080"); err != nil {
		return "", err
	}
	for done := 0; done < sz.events; {
		n := min(1000, sz.events-done)
		evs := make([]store.Event, 0, n)
		for i := done; i < done+n; i++ {
			evs = append(evs, store.Event{At: now.Add(-time.Duration(sz.events-i) * time.Second), Actor: fmt.Sprintf("smbench-%d", i%10),
				Action: "task.start", TargetType: "task", Target: ids[i%len(ids)], Outcome: "ok", Detail: "started", ProjectID: store.DefaultProjectID})
		}
		err := st.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.NewInsert().Model(&evs).Exec(ctx)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("insert events: %w", err)
		}
		done += n
	}
	return ids[0], nil
}
