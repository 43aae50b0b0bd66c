package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/handlers"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// ingestEnv is a real master (engine + routes) served on loopback over a store.
type ingestEnv struct {
	st      *store.Store
	m       *master.Master
	srv     *httptest.Server
	cleanup func()
	logs    *countHandler
	db      *dbClock
}

// dbClock sums the time the store's statements (BEGIN and COMMIT included)
// take, over all connections: divided by the runs stored, the DB time per
// run. With concurrent writers it includes the waits for locks (SQLite's
// single writer, rows of shared tasks).
type dbClock struct{ ns atomic.Int64 }

func (d *dbClock) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (d *dbClock) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	d.ns.Add(int64(time.Since(e.StartTime)))
}

// perRun is the DB time per run, in µs, since the sum was start.
func (d *dbClock) perRun(start int64, runs int) float64 {
	if runs <= 0 {
		return 0
	}
	return float64(d.ns.Load()-start) / 1e3 / float64(runs)
}

// newIngestEnv opens a store on SQLite (key "sqlite") or on the server of
// key, through its first node, with hooks added to its queries (before
// anything queries it: bun's hooks are not safe to add while it is used).
func (b *bench) newIngestEnv(ctx context.Context, key string, hooks ...bun.QueryHook) (*ingestEnv, error) {
	log, logs := b.newLogger()
	var st *store.Store
	var cleanup func()
	switch key {
	case "sqlite":
		dir := filepath.Join(b.tmp, "ingest-"+randHex(4))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		s, err := openSQLite(ctx, dir, log)
		if err != nil {
			return nil, err
		}
		st, cleanup = s, func() { s.Close() }
	default:
		s, c, err := b.serverOf(key).open(ctx, log)
		if err != nil {
			return nil, err
		}
		st, cleanup = s, c
	}
	clock := &dbClock{}
	st.DB.AddQueryHook(clock)
	for _, h := range hooks {
		st.DB.AddQueryHook(h)
	}
	m := master.New(master.Config{Identity: "master", ClusterKey: benchClusterKey, AdvertiseHost: "127.0.0.1:1",
		Health: master.HealthConfig{Interval: time.Hour}}, st, log)
	h, err := handlers.NewMasterRouter(ctx, handlers.MasterDeps{Master: m, Log: log})
	if err != nil {
		cleanup()
		return nil, err
	}
	srv := httptest.NewServer(h)
	return &ingestEnv{st: st, m: m, srv: srv, cleanup: cleanup, logs: logs, db: clock}, nil
}

func (e *ingestEnv) Close() {
	e.srv.Close()
	e.cleanup()
}

// ingestResult is one capacity measurement.
type ingestResult struct {
	rate            float64
	dbPerRun        float64 // µs
	batches, failed int     // batches posted; answers other than 200 (redelivered)
	firstErr        string  // the first failure's answer
}

// ingestPost drives the master's run-report endpoint the way worker reporters
// do: `senders` nodes, each posting batches of 500 reports one after the
// other, `total` reports in all; a batch that is refused is posted again after
// 1 s, as the reporter does. With shared, the batches hold runs of tasks that
// all the nodes execute (several executors), picked at random, so that batches
// posted at the same time share tasks; otherwise each node runs its own tasks.
// It returns runs stored per second.
func (b *bench) ingestPost(ctx context.Context, e *ingestEnv, senders, total int, tasks []string, shared bool) (ingestResult, error) {
	var res ingestResult
	// Every measurement starts from an empty runs table, so that the later
	// ones do not measure a bigger table: with random (v4 UUID) run ids a
	// table past the buffer pool (MariaDB's default is 128 MB, a few hundred
	// thousand runs) makes every insert read the disk.
	clear := "DELETE FROM runs"
	if e.st.Dialect != store.SQLite {
		clear = "TRUNCATE TABLE runs"
	}
	if _, err := e.st.DB.ExecContext(ctx, clear); err != nil {
		return res, fmt.Errorf("empty the runs table: %w", err)
	}
	before, err := countRuns(ctx, e.st.DB)
	if err != nil {
		return res, err
	}
	const batch = 500 // the worker reporter's batch size
	type node struct {
		name, secret string
		bodies       [][]byte
	}
	nodes := make([]*node, senders)
	var rows []store.Node
	for i := range nodes {
		n := workerNode(fmt.Sprintf("ing-%s-%d", randHex(3), i), "127.0.0.1:1", "boot")
		rows = append(rows, n)
		nodes[i] = &node{name: n.Name, secret: n.Secret}
	}
	if err := insertNodes(ctx, e.st.DB, rows); err != nil {
		return res, err
	}
	// A node may report only runs of tasks it executes: make each sender an
	// executor of the tasks it reports.
	var execs []store.TaskExecutor
	for ni, n := range nodes {
		mine := tasks
		if !shared {
			own := len(tasks) / senders
			mine = tasks[ni*own : (ni+1)*own]
		}
		for _, t := range mine {
			execs = append(execs, store.TaskExecutor{TaskID: t, Node: n.name})
		}
	}
	for len(execs) > 0 {
		part := execs[:min(500, len(execs))]
		execs = execs[len(part):]
		if _, err := e.st.DB.NewInsert().Model(&part).Exec(ctx); err != nil {
			return res, fmt.Errorf("insert executors: %w", err)
		}
	}
	// Build every body first: only the master's work is timed.
	now := time.Now().UTC()
	code := 0
	for k := 0; k < total; {
		for ni, n := range nodes {
			size := min(batch, total-k)
			if size <= 0 {
				break
			}
			runs := make([]protocol.RunReport, size)
			for j := range runs {
				// In the past: the master refuses times ahead of its clock.
				started := now.Add(-time.Duration(total-k-j) * time.Millisecond)
				task := tasks[rand.IntN(len(tasks))]
				if !shared {
					own := len(tasks) / senders
					task = tasks[ni*own+(k+j)%own]
				}
				runs[j] = protocol.RunReport{
					ID: uuid.NewString(), TaskID: task, Node: n.name,
					ScheduledAt: started.Truncate(time.Second), StartedAt: started, EndedAt: started.Add(3 * time.Millisecond),
					DurationMS: 3, Result: protocol.ResultSuccess, Attempt: 1, HTTPStatus: 200, ExitCode: &code,
					Output: `{"ok":true,"message":"smbench run report output of a typical size"}`,
				}
			}
			body, err := json.Marshal(protocol.RunsRequest{Runs: runs})
			if err != nil {
				return res, err
			}
			n.bodies = append(n.bodies, body)
			k += size
		}
	}
	// One kept-alive connection per sender, as each worker's reporter has
	// (the default keeps two idle: the others would dial for every batch).
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	defer client.CloseIdleConnections()
	settle()
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make(chan error, senders)
	db0 := e.db.ns.Load()
	t0 := time.Now()
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, body := range n.bodies {
				for attempt := 1; ; attempt++ {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+protocol.PathMasterRuns, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(protocol.HeaderNode, n.name)
					req.Header.Set(protocol.HeaderSecret, n.secret)
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					mu.Lock()
					res.batches++
					if resp.StatusCode != http.StatusOK {
						res.failed++
						if res.firstErr == "" {
							res.firstErr = fmt.Sprintf("%d %s", resp.StatusCode, data)
						}
					}
					mu.Unlock()
					if resp.StatusCode == http.StatusOK {
						break
					}
					// A worker keeps a refused batch and retries it for as long
					// as it takes; a minute of refusals in a row means the
					// master is stuck, not busy (10 was too few for SQLite
					// under -race, where 10 senders share 4 ingest slots).
					if attempt == ingestAttempts {
						errs <- fmt.Errorf("POST %s: %d %s (%d attempts)", protocol.PathMasterRuns, resp.StatusCode, data, ingestAttempts)
						return
					}
					time.Sleep(time.Second) // the reporter's first retry delay
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	res.dbPerRun = e.db.perRun(db0, total)
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	after, err := countRuns(ctx, e.st.DB)
	if err != nil {
		return res, err
	}
	if after-before != total {
		return res, fmt.Errorf("%d runs stored, want %d", after-before, total)
	}
	res.rate = float64(total) / took.Seconds()
	return res, nil
}

// e2eWorkers runs real worker engines whose HTTP tasks fire every second and
// deliver their run reports to the master, which stores them. Tasks are in the
// database as running before the workers register, so registration pushes them.
type e2eWorkers struct {
	ws     []*worker.Worker
	target *httptest.Server
	cancel context.CancelFunc
}

func (b *bench) startE2E(ctx context.Context, e *ingestEnv, workers, tasksPer int) (*e2eWorkers, error) {
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusNoContent)
	}))
	x := &e2eWorkers{target: target}
	prefix := randHex(3)
	for i := 0; i < workers; i++ {
		name := fmt.Sprintf("e2e-%s-%d", prefix, i)
		var tasks []*store.Task
		for j := 0; j < tasksPer; j++ {
			t, err := taskRow(httpTask(fmt.Sprintf("e2e-%s-%d-%05d", prefix, i, j), "* * * * * *", target.URL), store.TaskRunning, []string{name})
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, t)
		}
		if err := insertTasks(ctx, e.st.DB, tasks); err != nil {
			target.Close()
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	x.cancel = cancel
	for i := 0; i < workers; i++ {
		name := fmt.Sprintf("e2e-%s-%d", prefix, i)
		w, err := worker.New(worker.Config{
			Identity: name, Protocol: "http", IP: "127.0.0.1", Port: 20000 + i, Priority: 1, MaxConcurrency: tasksPer,
			MasterURL: e.srv.URL, ClusterKey: benchClusterKey, AutoRegister: true,
			DataDir: filepath.Join(b.tmp, name), StopTimeout: 5 * time.Second,
		}, slog.New(e.logs))
		if err != nil {
			x.Close()
			return nil, err
		}
		x.ws = append(x.ws, w)
		go w.Run(runCtx)
	}
	// Registered and scheduling: the worker reports its running tasks.
	deadline := time.Now().Add(60 * time.Second)
	for _, w := range x.ws {
		for w.Health().RunningTasks < tasksPer {
			if time.Now().After(deadline) {
				x.Close()
				return nil, fmt.Errorf("worker %s schedules %d of %d tasks after 60s", w.Name(), w.Health().RunningTasks, tasksPer)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return x, nil
}

func (x *e2eWorkers) Close() {
	x.cancel()
	var wg sync.WaitGroup
	for _, w := range x.ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = w.Stop(ctx)
		}()
	}
	wg.Wait()
	x.target.Close()
}

// recordedRate counts stored runs over a window; it returns them per second
// and the DB time per run (µs).
func recordedRate(ctx context.Context, e *ingestEnv, d time.Duration) (rate, dbPerRun float64, err error) {
	c0, err := countRuns(ctx, e.st.DB)
	if err != nil {
		return 0, 0, err
	}
	db0 := e.db.ns.Load()
	t0 := time.Now()
	sleepUntil(ctx, t0.Add(d))
	db1 := e.db.ns.Load()
	c1, err := countRuns(ctx, e.st.DB)
	if err != nil {
		return 0, 0, err
	}
	return float64(c1-c0) / time.Since(t0).Seconds(), float64(db1-db0) / 1e3 / float64(max(1, c1-c0)), nil
}

// ingestTargets are issue 12's ingest targets: runs per second that 10
// workers must get recorded (Galera's is MySQL's: it is a MySQL server).
var ingestTargets = map[string]int{"sqlite": 5000, "mysql": 10000, "galera": 10000, "postgres": 10000}

// ingestLabels name the engines in the ingest rows.
var ingestLabels = map[string]string{"sqlite": "SQLite", "mysql": "MariaDB/MySQL",
	"galera": "Galera (3 nodes, the master on the first)", "postgres": "PostgreSQL"}

func (b *bench) ingestScenario(ctx context.Context) []row {
	var rows []row
	const senders = 10
	for _, key := range []string{"sqlite", "mysql", "galera", "postgres"} {
		label := ingestLabels[key]
		goal := ingestTargets[key]
		e2eName := fmt.Sprintf("runs recorded end to end, %s (worker → master → DB)", label)
		postName := fmt.Sprintf("  %s: master ingest capacity, %d workers posting 500-run batches of 2,000 tasks", label, senders)
		if key != "sqlite" && b.serverOf(key).dsns == nil {
			rows = append(rows, row{e2eName, b.serverOf(key).missing, "≥ 2,000 runs/s", Skip})
			continue
		}
		e, err := b.newIngestEnv(ctx, key)
		if err != nil {
			rows = append(rows, errRow(e2eName, err))
			continue
		}
		// Real workers, real tasks, real reporter. The offered load is what
		// this 2-core box can fire besides the master and the database; the
		// capacity rows below find how far the master goes.
		workers, per := b.pick(senders, 2), b.pick(250, 100)
		offered := workers * per
		x, err := b.startE2E(ctx, e, workers, per)
		if err != nil {
			rows = append(rows, errRow(e2eName, err))
			e.Close()
			continue
		}
		time.Sleep(3 * time.Second) // warm-up: connections, first batches
		var rates, dbs []float64
		window := time.Duration(b.pick(20, 4)) * time.Second
		for i := 0; i < b.opt.Runs; i++ {
			r, db, err := recordedRate(ctx, e, window)
			if err != nil {
				rows = append(rows, errRow(e2eName, err))
				break
			}
			b.logf("%s: %.0f runs/s recorded, DB time %.0f µs per run", label, r, db)
			rates, dbs = append(rates, r), append(dbs, db)
		}
		x.Close()
		if len(rates) == b.opt.Runs {
			r := medianF(rates)
			lo, hi := rates[0], rates[0]
			for _, x := range rates {
				lo, hi = min(lo, x), max(hi, x)
			}
			fig := fmt.Sprintf("%s runs/s recorded (windows %s–%s) of %s/s fired (%d workers × %s HTTP tasks every second; %s windows); DB time %.0f µs per run",
				fmtInt(int(r)), fmtInt(int(lo)), fmtInt(int(hi)), fmtInt(offered), workers, fmtInt(per), window, medianF(dbs))
			v := verdict(r >= 2000)
			if float64(offered) < 2000 {
				v = Info
			}
			rows = append(rows, row{e2eName, fig, "≥ 2,000 runs/s", v})
		}
		// The master's capacity: as fast as the workers' reporters can post.
		var taskIDs []string
		var tasks []*store.Task
		for j := 0; j < 2000; j++ {
			t, _ := taskRow(httpTask(fmt.Sprintf("ing-%s-%03d", randHex(3), j), "0 * * * * *", "http://127.0.0.1:1"), store.TaskRunning, nil)
			tasks = append(tasks, t)
			taskIDs = append(taskIDs, t.ID)
		}
		if err := insertTasks(ctx, e.st.DB, tasks); err != nil {
			rows = append(rows, errRow(postName, err))
			e.Close()
			continue
		}
		total := b.pick(100000, 10000)
		e.logs.reset()
		for _, shared := range []bool{false, true} {
			name := postName + " (own tasks)"
			if shared {
				name = postName + " (shared tasks)"
			}
			var caps, dbs []float64
			var batches, failed int
			firstErr := ""
			for i := 0; i < b.opt.Runs; i++ {
				r, err := b.ingestPost(ctx, e, senders, total, taskIDs, shared)
				if err != nil {
					rows = append(rows, errRow(name, err))
					break
				}
				b.logf("%s: ingest capacity %.0f runs/s, DB time %.0f µs per run (%d of %d batches refused)", label, r.rate, r.dbPerRun, r.failed, r.batches)
				caps, dbs = append(caps, r.rate), append(dbs, r.dbPerRun)
				batches, failed = batches+r.batches, failed+r.failed
				if firstErr == "" {
					firstErr = r.firstErr
				}
			}
			if len(caps) != b.opt.Runs {
				continue
			}
			fig := fmt.Sprintf("%s runs/s (%s runs per measurement); DB time %.0f µs per run (statement time summed over connections, lock waits included)",
				fmtInt(int(medianF(caps))), fmtInt(total), medianF(dbs))
			v := verdict(medianF(caps) >= float64(goal))
			if failed > 0 {
				if _, logged := e.logs.warnings(); len(logged) > 0 {
					for _, l := range logged {
						if strings.Contains(l, "server error") {
							firstErr = l
							break
						}
					}
				}
				fig += fmt.Sprintf("; %d of %d posts refused (redelivered after 1 s): %.160s", failed, batches, firstErr)
				v = Miss
			}
			rows = append(rows, row{name, fig, fmt.Sprintf("≥ %s runs/s, no refused batch", fmtInt(goal)), v})
		}
		if n, first := e.logs.warnings(); n > 0 && b.opt.Verbose {
			b.logf("%s: %d warnings logged, first: %v", label, n, first)
		}
		e.Close()
	}
	return rows
}

// ingestAttempts bounds how often one sender posts a refused batch again,
// a second apart.
const ingestAttempts = 60
