package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

const (
	benchUser     = "bench"
	benchPassword = "smbench-password-1"
)

// seedNodes stores n nodes (one master) in a realistic mix of states.
func seedNodes(ctx context.Context, st *store.Store, n int) ([]string, error) {
	now := time.Now().UTC()
	nodes := make([]store.Node, 0, n)
	var names []string
	for i := 0; i < n; i++ {
		nd := workerNode(fmt.Sprintf("worker-%05d", i), fmt.Sprintf("10.%d.%d.%d:30001", i/65536%256, i/256%256, i%256), "boot"+randHex(4))
		nd.LastSeen = now.Add(-time.Duration(i%90) * time.Second)
		nd.Priority, nd.MaxConcurrency = 1+i%5, 20
		switch {
		case i == 0:
			nd.Name, nd.Type, nd.Mode = "master", store.TypeMaster, store.ModeAuto
		case i%10 == 0:
			nd.Status, nd.Failures, nd.Reason = store.StatusOffline, 0, "offline after 3 failed health checks: node is unreachable: connection refused"
			nd.LastSeen = now.Add(-time.Duration(i) * time.Minute)
		case i%5 == 0:
			nd.Status, nd.Mode = store.StatusIdle, store.ModeManual
		case i%7 == 0:
			nd.Failures, nd.Reason = 1, "node is unreachable: context deadline exceeded"
		}
		nodes = append(nodes, nd)
		if nd.Type == store.TypeWorker {
			names = append(names, nd.Name)
		}
	}
	return names, insertNodes(ctx, st.DB, nodes)
}

// seedRuns stores tasks and `runs` run records: half of them belong to the
// first task, the rest are spread over the others.
func seedRuns(ctx context.Context, st *store.Store, nodes []string, tasks, runs int) (string, error) {
	var rows []*store.Task
	for i := 0; i < tasks; i++ {
		def := httpTask(uuid.NewString(), fmt.Sprintf("%d * * * * *", i%60), "http://billing.internal:8080")
		def.Title = fmt.Sprintf("ping billing %03d", i)
		status := []store.TaskStatus{store.TaskRunning, store.TaskRunning, store.TaskPaused, store.TaskStopped}[i%4]
		t, err := taskRow(def, status, []string{nodes[i%len(nodes)], nodes[(i+1)%len(nodes)]})
		if err != nil {
			return "", err
		}
		rows = append(rows, t)
	}
	if err := insertTasks(ctx, st.DB, rows); err != nil {
		return "", err
	}
	now := time.Now().UTC()
	code := 0
	batch := make([]store.Run, 0, 500)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := store.InsertRuns(ctx, st.DB, batch)
		batch = batch[:0]
		return err
	}
	for i := 0; i < runs; i++ {
		t := rows[0]
		if i%2 == 1 {
			t = rows[1+i%(tasks-1)]
		}
		started := now.Add(-time.Duration(runs-i) * time.Second)
		res := protocol.ResultSuccess
		if i%17 == 0 {
			res = protocol.ResultFailed
		}
		batch = append(batch, store.Run{ID: uuid.NewString(), TaskID: t.ID, Node: t.Executors[0], ScheduledAt: started.Truncate(time.Second),
			StartedAt: started, EndedAt: started.Add(12 * time.Millisecond), DurationMS: 12, Result: res, Attempt: 1,
			HTTPStatus: 200, ExitCode: &code, Output: `{"status":"ok","latency_ms":12}`})
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return "", err
			}
		}
	}
	return rows[0].ID, flush()
}

// timeHandler serves path in-process (no network) and returns the median and
// p95 of n timed requests after a warm-up, the body size, and how many
// answers were 503 and asked again. A 503 is the master's own answer when
// the database does not answer within its request deadline: on a starved
// machine (every CI package at once under -race) that is load, not a broken
// page, so it is asked again up to three times and counted in the figure;
// any other status is an error.
func timeHandler(h http.Handler, path, cookie string, hx bool, n int) (med, p95 time.Duration, size, retried int, err error) {
	once := func() (time.Duration, int, int, error) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Cookie", cookie)
		if hx {
			req.Header.Set("HX-Request", "true")
		}
		rec := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(t0)
		if rec.Code != http.StatusOK {
			return 0, 0, rec.Code, fmt.Errorf("GET %s: %d %.200s", path, rec.Code, rec.Body.String())
		}
		return d, rec.Body.Len(), rec.Code, nil
	}
	do := func() (time.Duration, int, error) {
		for try := 0; ; try++ {
			d, s, code, err := once()
			if err == nil || code != http.StatusServiceUnavailable || try == 3 {
				return d, s, err
			}
			retried++
		}
	}
	for i := 0; i < 3; i++ {
		if _, _, err := do(); err != nil {
			return 0, 0, 0, retried, err
		}
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		d, s, err := do()
		if err != nil {
			return 0, 0, 0, retried, err
		}
		ds, size = append(ds, d), s
	}
	s := sortDurations(ds)
	return medianDur(ds), percentile(s, 0.95), size, retried, nil
}

func (b *bench) renderScenario(ctx context.Context) []row {
	nNodes := b.pick(1000, 200)
	nRuns := b.pick(10000, 1000)
	nTasks := 100
	iters := b.pick(30, 3) * b.opt.Runs
	pageName := fmt.Sprintf("nodes page, %s nodes (GET /nodes, server time)", fmtInt(nNodes))
	dir := filepath.Join(b.tmp, "render")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return []row{errRow(pageName, err)}
	}
	log, _ := b.newLogger()
	st, err := openSQLite(ctx, dir, log)
	if err != nil {
		return []row{errRow(pageName, err)}
	}
	defer st.Close()
	names, err := seedNodes(ctx, st, nNodes)
	if err != nil {
		return []row{errRow(pageName, err)}
	}
	hot, err := seedRuns(ctx, st, names, nTasks, nRuns)
	if err != nil {
		return []row{errRow(pageName, err)}
	}
	if err := addAdmin(ctx, st.DB, benchUser, benchPassword); err != nil {
		return []row{errRow(pageName, err)}
	}
	m := master.New(master.Config{Identity: "master", ClusterKey: benchClusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour}}, st, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		return []row{errRow(pageName, err)}
	}
	srv := httptest.NewServer(h)
	cookie, err := login(srv.URL, benchUser, benchPassword)
	srv.Close()
	if err != nil {
		return []row{errRow(pageName, err)}
	}

	type page struct {
		name, path string
		hx         bool
		judged     bool
	}
	pages := []page{
		{pageName, "/nodes", false, true},
		{fmt.Sprintf("nodes rows fragment, %s nodes (GET /nodes/rows, htmx poll)", fmtInt(nNodes)), "/nodes/rows", true, true},
		{fmt.Sprintf("task list, %d tasks, %s runs in the DB (GET /tasks)", nTasks, fmtInt(nRuns)), "/tasks", false, false},
		{fmt.Sprintf("  task rows fragment (GET /tasks/rows)"), "/tasks/rows", true, false},
		{fmt.Sprintf("  task detail, task with %s runs (GET /tasks/:id)", fmtInt(nRuns/2)), "/tasks/" + hot, false, false},
		{fmt.Sprintf("  open API node list, %s nodes (GET /api/v1/nodes)", fmtInt(nNodes)), "/api/v1/nodes", false, false},
	}
	var rows []row
	for _, p := range pages {
		settle()
		med, p95, size, retried, err := timeHandler(h, p.path, cookie, p.hx, iters)
		if err != nil {
			rows = append(rows, errRow(p.name, err))
			continue
		}
		fig := fmt.Sprintf("median %s, p95 %s (%d requests, %s KiB)", fmtDur(med), fmtDur(p95), iters, fmtInt(size>>10))
		if retried > 0 {
			fig += fmt.Sprintf("; %d answered 503 (database deadline) and were asked again", retried)
		}
		if p.judged {
			rows = append(rows, row{p.name, fig, "< 30 ms", verdict(med < 30*time.Millisecond)})
		} else {
			rows = append(rows, row{p.name, fig, "(30 ms, as the node page)", Info})
		}
	}
	return rows
}
