package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// delayedScenario measures the fire lag of delayed tasks (SPEC section 9):
// with 100,000 pending, 1,000 due in the same second are sent by the leader
// master to two real worker engines, which call a loopback target; the lag
// is each call's arrival minus its task's due time.
func (b *bench) delayedScenario(ctx context.Context) []row {
	pending, due := b.pick(100_000, 5_000), b.pick(1_000, 200)
	var rows []row
	for _, dialect := range []string{"sqlite", "mysql"} {
		label := "SQLite"
		if dialect == "mysql" {
			label = "MariaDB/MySQL"
		}
		name := fmt.Sprintf("delayed tasks, %s: %s pending, %s due in the same second (fire lag at the target)", label, fmtInt(pending), fmtInt(due))
		if dialect == "mysql" && b.opt.MySQL == "" {
			rows = append(rows, row{name, "no -mysql DSN (nor $SM_TEST_MYSQL_DSN)", "p99 < 1 s", Skip})
			continue
		}
		r, err := b.delayedRun(ctx, dialect, pending, due, time.Second)
		if err != nil {
			rows = append(rows, lateRow(name, err))
			continue
		}
		b.logf("%s: %s; created the due ones at %.0f/s; all %d recorded as runs %s after the second began",
			label, fmtLag(r.lag), r.createRate, due, fmtDur(r.recorded))
		rows = append(rows,
			row{name, fmt.Sprintf("%s (%s calls, 1 run)", fmtLag(r.lag), fmtInt(r.lag.n)), "p99 < 1 s", verdict(r.lag.p99 < time.Second)},
			row{fmt.Sprintf("  %s: every one recorded as a successful run, after the second began", label), fmtDur(r.recorded), "-", Info},
			row{fmt.Sprintf("  %s: creation through the engine (validation, insert, event)", label), fmt.Sprintf("%.0f tasks/s", r.createRate), "-", Info},
		)
	}
	return rows
}

// delayedResult is one measurement.
type delayedResult struct {
	lag        lagStats
	recorded   time.Duration // from the start of the due second until all are success
	createRate float64
}

// delayedRun measures due delayed tasks among pending ones, their due times
// spread evenly over spread from one whole second (0: all at that instant).
func (b *bench) delayedRun(ctx context.Context, dialect string, pending, due int, spread time.Duration) (delayedResult, error) {
	var res delayedResult
	e, err := b.newIngestEnv(ctx, dialect)
	if err != nil {
		return res, err
	}
	defer e.Close()
	log := slog.New(e.logs)

	// The target: the arrival of each task's call, by its id.
	var mu sync.Mutex
	arrived := make(map[string]time.Time, due)
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		now := time.Now()
		id := r.Header.Get("X-SM-Delayed-Id")
		mu.Lock()
		if _, seen := arrived[id]; !seen {
			arrived[id] = now
		}
		mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()

	// Two real worker engines, registered with the master, serving the worker API.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ws []*worker.Worker
	var srvs []*http.Server
	defer func() {
		for _, w := range ws {
			sctx, c := context.WithTimeout(context.Background(), 20*time.Second)
			_ = w.Stop(sctx)
			c()
		}
		for _, s := range srvs {
			_ = s.Close()
		}
	}()
	prefix := randHex(3)
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return res, err
		}
		name := fmt.Sprintf("dly-%s-%d", prefix, i)
		w, err := worker.New(worker.Config{
			Identity: name, Protocol: "http", IP: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Priority: 1, MaxConcurrency: due,
			MasterURL: e.srv.URL, ClusterKey: benchClusterKey, AutoRegister: true,
			DataDir: filepath.Join(b.tmp, name), StopTimeout: 5 * time.Second,
		}, log)
		if err != nil {
			ln.Close()
			return res, err
		}
		srv := &http.Server{Handler: worker.NewHandler(w, log), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		ws, srvs = append(ws, w), append(srvs, srv)
		go w.Run(runCtx)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes, err := store.ListNodesByStatus(ctx, e.st.DB, store.StatusRunning)
		if err != nil {
			return res, err
		}
		if len(nodes) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			n, first := e.logs.warnings()
			return res, fmt.Errorf("workers not running after 60s (%d warnings: %v)", n, first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.m.Start(ctx); err != nil {
		return res, err
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		e.m.Stop(sctx)
		c()
	}()

	// The pending ones, due in the next month, inserted in bulk.
	if err := insertFarDelayed(ctx, e.st.DB, pending-due, target.URL); err != nil {
		return res, err
	}
	// The due ones, created through the engine, due over one second a few
	// seconds ahead, after their creation: how long that takes here is
	// measured first (a probe of far tasks), so a slow machine gets the
	// set-up time it needs before the second, not an error.
	probe := min(200, due)
	tp := time.Now()
	for i := range probe {
		in := master.DelayedInput{SourceApp: "smbench", Topic: "probe", ContentKey: fmt.Sprintf("%s-probe-%d", prefix, i),
			At: time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339Nano), NotifyURL: target.URL + "/cb"}
		if _, _, err := e.m.Delayed().CreateDelayed(ctx, in, "smbench"); err != nil {
			return res, fmt.Errorf("probe: %w", err)
		}
	}
	estimate := time.Since(tp) * time.Duration(due) / time.Duration(probe)
	lead := max(time.Duration(b.pick(10, 5)+due/1000)*time.Second, 3*estimate+2*time.Second)
	second := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	dueAt := make(map[string]time.Time, due)
	var dmu sync.Mutex
	t0 := time.Now()
	errs := make(chan error, 8)
	next := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// After a failure the creators keep taking numbers without
			// creating, so the loop handing them out never blocks.
			for i := range next {
				if failed.Load() {
					continue
				}
				at := second.Add(time.Duration(i) * spread / time.Duration(due))
				in := master.DelayedInput{SourceApp: "smbench", Topic: "due", ContentKey: fmt.Sprintf("%s-%d", prefix, i),
					At: at.UTC().Format(time.RFC3339Nano), NotifyURL: target.URL + "/cb", NotifyBody: `{"n":` + fmt.Sprint(i) + `}`}
				d, _, err := e.m.Delayed().CreateDelayed(ctx, in, "smbench")
				// A busy database (a checkpoint, a lock) is asked again, as
				// an application would.
				for try := 0; err != nil && store.IsRetryable(err) && try < 5; try++ {
					time.Sleep(time.Duration(50<<try) * time.Millisecond)
					d, _, err = e.m.Delayed().CreateDelayed(ctx, in, "smbench")
				}
				if err != nil {
					if failed.CompareAndSwap(false, true) {
						if !time.Now().Before(at) {
							// Created too late for its time: the set-up
							// outlasted three times its estimate.
							err = fmt.Errorf("%w (delayed task %d, estimate %s): %v", errLateSetup, i, estimate.Round(time.Millisecond), err)
						}
						errs <- fmt.Errorf("delayed task %d: %w", i, err)
					}
					continue
				}
				dmu.Lock()
				dueAt[d.ID] = d.DueAt
				dmu.Unlock()
			}
		}()
	}
	for i := 0; i < due; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, fmt.Errorf("create: %w", err)
	}
	res.createRate = float64(due) / time.Since(t0).Seconds()
	if time.Now().After(second) {
		b.logf("warning: creating the due tasks took until %s after their second began", time.Since(second).Round(time.Millisecond))
	}

	// Every call arrives, every run is recorded.
	deadline = second.Add(2 * time.Minute)
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= due {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			w, first := e.logs.warnings()
			return res, fmt.Errorf("%d of %d callbacks arrived (%d warnings: %v)", n, due, w, first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		// Counted by the (source_app, topic, …) index: a count of every
		// status would read all the pending rows and slow down what it measures.
		_, done, err := store.ListDelayed(ctx, e.st.DB, store.DelayedFilter{SourceApp: "smbench", Topic: "due", Status: store.DelayedSuccess, Limit: 1})
		if err != nil {
			return res, err
		}
		if done >= due {
			res.recorded = time.Since(second)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("%d of %d recorded as success", done, due)
		}
		time.Sleep(100 * time.Millisecond)
	}
	lags := make([]time.Duration, 0, due)
	mu.Lock()
	for id, at := range arrived {
		if d, ok := dueAt[id]; ok {
			lags = append(lags, at.Sub(d))
		}
	}
	extra := len(arrived) - len(lags)
	mu.Unlock()
	if extra > 0 {
		return res, fmt.Errorf("%d callbacks of tasks that were not due", extra)
	}
	res.lag = statsOf(lags)
	return res, nil
}

// insertFarDelayed bulk-inserts n pending delayed tasks due in 1 to 30 days.
func insertFarDelayed(ctx context.Context, db *bun.DB, n int, target string) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	prefix := randHex(4)
	executors, _ := json.Marshal([]string{})
	for done := 0; done < n; {
		size := min(1000, n-done)
		rows := make([]store.DelayedTask, size)
		for i := range rows {
			k := fmt.Sprintf("%s-%d", prefix, done+i)
			key := store.DelayedPendingKey(store.DefaultProjectID, "smbench", "far", k)
			due := now.Add(24*time.Hour + time.Duration(rand.Int64N(int64(29*24*time.Hour))))
			rows[i] = store.DelayedTask{
				ID: randHex(16), ProjectID: store.DefaultProjectID, SourceApp: "smbench", Topic: "far", ContentKey: k, PendingKey: &key, Status: store.DelayedPending,
				DueAt: due, NextAt: due, NotifyURL: target + "/far", NotifyBody: `{"far":true}`, ContentType: "application/json",
				Executors: string(executors), Keepers: "[]", CreatedBy: "smbench", CreatedAt: now, UpdatedAt: now,
			}
		}
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.NewInsert().Model(&rows).Exec(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("insert pending delayed tasks: %w", err)
		}
		done += size
	}
	return nil
}
