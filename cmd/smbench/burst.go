package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// burstScenario measures a same-instant burst against its floor, in the
// same run: 10,000 HTTP tasks firing at one instant on two worker engines
// (the workers' default --maxc 20, and a --maxc that fits the burst), and a
// bare fan-out of the same 10,000 GETs from one process (10,000 goroutines,
// the two workers' connection budget). Lags are each request's arrival at a
// loopback target (another process) minus the fire time.
func (b *bench) burstScenario(ctx context.Context) []row {
	tasks := b.pick(10_000, 1_000)
	var rows []row
	var floors []lagStats
	for i := 0; i < b.opt.Runs; i++ {
		settle()
		f, err := burstFloor(ctx, tasks, 2*1024)
		if err != nil {
			return []row{errRow("burst floor", err)}
		}
		b.logf("run %d: bare fan-out of %d GETs: %s", i+1, tasks, fmtLag(f))
		floors = append(floors, f)
	}
	floor := medianLag(floors)
	floorName := fmt.Sprintf("burst floor: bare fan-out of %s GETs at one instant from one process (%d runs)", fmtInt(tasks), b.opt.Runs)
	rows = append(rows, row{floorName, fmtLag(floor), "reference", Info})
	for _, maxc := range []int{20, tasks / 2} {
		var all []lagStats
		skipped := 0
		name := fmt.Sprintf("burst: %s HTTP tasks firing at one instant on 2 workers, --maxc %d (arrival − fire time)", fmtInt(tasks), maxc)
		var err error
		for i := 0; i < b.opt.Runs; i++ {
			settle()
			var r burstResult
			r, err = b.burstWorkers(ctx, burstSpec{tasks: tasks, workers: 2, maxc: maxc, warm: 5 * time.Second, timeout: 30 * time.Second},
				filepath.Join(b.tmp, fmt.Sprintf("burst%d-%d", maxc, i)))
			if err != nil {
				break
			}
			b.logf("run %d: --maxc %d: %s, %d skipped %s", i+1, maxc, fmtLag(r.arrival), r.skipped, r.skipWhy)
			all = append(all, r.arrival)
			skipped += r.skipped
		}
		if err != nil {
			rows = append(rows, lateRow(name, err))
			continue
		}
		m := medianLag(all)
		ok := m.p99 <= 2*floor.p99 || m.p99 <= time.Second
		rows = append(rows, row{name, fmt.Sprintf("%s (%s requests, %d skipped); %.2f× the floor's p99", fmtLag(m), fmtInt(m.n), skipped, ratioP99(m, floor)),
			"p99 ≤ 2× floor or ≤ 1 s", verdict(ok && skipped == 0)})
	}
	return rows
}

// burstDelayedScenario is the same burst through the master: 10,000 delayed
// tasks due at one instant, sent by the leader to two workers, beside the
// bare fan-out of as many requests measured in the same run.
func (b *bench) burstDelayedScenario(ctx context.Context) []row {
	tasks := b.pick(10_000, 1_000)
	var rows []row
	for _, dialect := range []string{"sqlite", "mysql"} {
		label := "SQLite"
		if dialect == "mysql" {
			label = "MariaDB/MySQL"
		}
		name := fmt.Sprintf("burst: %s delayed tasks due at one instant, %s, 2 workers (arrival − due time)", fmtInt(tasks), label)
		if dialect == "mysql" && b.opt.MySQL == "" {
			rows = append(rows, row{name, "no -mysql DSN (nor $SM_TEST_MYSQL_DSN)", "p99 ≤ 2× floor or ≤ 1 s", Skip})
			continue
		}
		settle()
		floor, err := burstFloor(ctx, tasks, 2*1024)
		if err != nil {
			rows = append(rows, errRow(name, err))
			continue
		}
		settle()
		r, err := b.delayedRun(ctx, dialect, tasks, tasks, 0)
		if err != nil {
			rows = append(rows, lateRow(name, err))
			continue
		}
		b.logf("%s: %s; floor %s", label, fmtLag(r.lag), fmtLag(floor))
		ok := r.lag.p99 <= 2*floor.p99 || r.lag.p99 <= time.Second
		rows = append(rows, row{name, fmt.Sprintf("%s (%s calls); floor p99 %s, %.2f×; all recorded %s after", fmtLag(r.lag), fmtInt(r.lag.n),
			fmtDur(floor.p99), ratioP99(r.lag, floor), fmtDur(r.recorded)), "p99 ≤ 2× floor or ≤ 1 s", verdict(ok)})
	}
	return rows
}

// burstResult is one burst on the workers.
type burstResult struct {
	arrival lagStats
	skipped int
	skipWhy string
	// early and late are the arrival rates (requests/s) of the second and
	// the ninth tenth of the arrivals: with the queue long, and nearly drained.
	early, late float64
	// rss is the process's peak resident memory from just before the fire
	// until every request arrived (workers in process), base its resident
	// memory then: the tasks taken, nothing fired yet.
	rss, base int64
	// goroutines is the most the process had while the burst drained
	// (sampled every 200ms).
	goroutines int
}

// burstSpec is one burst: tasks split over workers with max concurrency
// maxc, firing at least warm after its set-up; timeout is each task's (its wait for a slot
// included).
type burstSpec struct {
	tasks, workers, maxc int
	warm, timeout        time.Duration
}

// errLateSetup is a burst whose tasks could not be given their fire time
// before it came: the workers took longer to re-time their tasks than twice
// the whole set-up had taken (a starved machine). The burst is not measured;
// lateRow reports it, never as an error.
var errLateSetup = errors.New("the workers took their fire time after it had passed")

// lateRow is the row of a burst not measured because of errLateSetup, else
// the error's row.
func lateRow(name string, err error) row {
	if errors.Is(err, errLateSetup) {
		return row{name, "not measured: " + err.Error(), "-", Skip}
	}
	return errRow(name, err)
}

// burstAt is when a burst fires: a whole second after a warm-up long enough
// for the workers to take their fire time.
func burstAt(warm time.Duration) time.Time {
	return time.Now().Add(warm).Truncate(time.Second).Add(time.Second)
}

// burstParked is the fire time the tasks are set up with, a day ahead, before
// the burst's own instant is known: none fires there.
func burstParked() time.Time { return time.Now().Add(24 * time.Hour).Truncate(time.Second) }

// burstWorkers runs HTTP tasks with a one-time schedule at the same instant,
// split over in-process worker engines, reporting to the lag peer as their
// master. Set-up first, however long it takes: the peer starts, the workers
// start and schedule their tasks at a parked time a day ahead. Only then is
// the burst's instant fixed, after a warm-up of sp.warm or twice the
// set-up's scheduling, whichever is longer, and the workers re-time their
// tasks to it (a schedule of the same tasks, replacing theirs).
func (b *bench) burstWorkers(ctx context.Context, sp burstSpec, dir string) (burstResult, error) {
	var res burstResult
	tasks, n, maxc := sp.tasks, sp.workers, sp.maxc
	parked := burstParked()
	peer, err := startLagPeer(parked, time.Second, fmt.Sprintf("%s=%d", burstAtEnv, parked.UnixNano()))
	if err != nil {
		return res, err
	}
	defer peer.Close()
	log, logs := b.newLogger()
	var ws []*worker.Worker
	defer func() {
		for _, w := range ws {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = w.Stop(sctx)
			cancel()
		}
	}()
	specs := func(i int, at time.Time) []protocol.TaskSpec {
		specs := make([]protocol.TaskSpec, 0, tasks/n+1)
		for k := i; k < tasks; k += n {
			def := httpTask(fmt.Sprintf("burst%06d", k), "", peer.URL)
			def.Schedule = protocol.Schedule{Kind: protocol.ScheduleOnce, At: &at}
			def.Timeout = protocol.Duration(sp.timeout)
			specs = append(specs, protocol.TaskSpec{TaskDef: def, Executors: 1})
		}
		return specs
	}
	setup := time.Now()
	var scheduling time.Duration
	for i := 0; i < n; i++ {
		w, err := worker.New(worker.Config{
			Identity: fmt.Sprintf("burst%d", i), Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: maxc,
			MasterURL: peer.URL, ClusterKey: benchClusterKey, DataDir: filepath.Join(dir, fmt.Sprint(i)), StopTimeout: 5 * time.Second,
		}, log)
		if err != nil {
			return res, err
		}
		ws = append(ws, w)
		go w.Run(ctx)
		began := time.Now()
		if err := w.Startup(ctx, protocol.StartupRequest{Tasks: specs(i, parked)}); err != nil {
			return res, err
		}
		scheduling += time.Since(began)
	}
	warm := max(sp.warm, 2*scheduling)
	at := burstAt(warm)
	b.logf("burst: set up in %s (scheduling %s); fires at %s, %s from now", fmtDur(time.Since(setup)), fmtDur(scheduling),
		at.Format("15:04:05"), fmtDur(time.Until(at)))
	if err := peer.setBurst(at); err != nil {
		return res, err
	}
	for i, w := range ws {
		if err := w.Startup(ctx, protocol.StartupRequest{Tasks: specs(i, at)}); err != nil {
			if time.Now().After(at) {
				return res, fmt.Errorf("%w: a warm-up of %s (twice the set-up's scheduling, %s) was too short (%v)", errLateSetup, warm, scheduling, err)
			}
			return res, err
		}
	}
	if time.Now().After(at) {
		return res, fmt.Errorf("%w: a warm-up of %s (twice the set-up's scheduling, %s) was too short", errLateSetup, warm, scheduling)
	}
	// The peak memory is the burst's own: the one of the set-up (and of an
	// earlier burst in this process) is forgotten.
	resetPeakRSS()
	if rss, _, err := procStatus(os.Getpid()); err == nil {
		res.base = rss
	}
	var st lagPeerStats
	for deadline := at.Add(sp.timeout + 30*time.Second); ; {
		time.Sleep(200 * time.Millisecond)
		res.goroutines = max(res.goroutines, runtime.NumGoroutine())
		st, err = peer.stats()
		if err != nil {
			return res, err
		}
		if len(st.Arrivals)+st.Skipped >= tasks || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if got := len(st.Arrivals) + st.Skipped; got < tasks {
		w, first := logs.warnings()
		return res, fmt.Errorf("%d of %d requests arrived or skipped (%d warnings: %v)", got, tasks, w, first)
	}
	res.arrival, res.skipped, res.skipWhy = statsOf(st.Arrivals), st.Skipped, st.SkipWhy
	if s := sortDurations(st.Arrivals); len(s) >= 10 {
		rate := func(a, b float64) float64 {
			i, j := int(a*float64(len(s))), int(b*float64(len(s)))-1
			return float64(j-i) / max(s[j]-s[i], time.Millisecond).Seconds()
		}
		res.early, res.late = rate(0.1, 0.2), rate(0.8, 0.9)
	}
	if _, hwm, err := procStatus(os.Getpid()); err == nil {
		res.rss = hwm
	}
	return res, nil
}

// burstFloor sends tasks GETs at one instant from as many goroutines, with a
// transport holding at most conns connections to the target, and returns
// their arrival lag at the lag peer.
func burstFloor(ctx context.Context, tasks, conns int) (lagStats, error) {
	parked := burstParked()
	peer, err := startLagPeer(parked, time.Second, fmt.Sprintf("%s=%d", burstAtEnv, parked.UnixNano()))
	if err != nil {
		return lagStats{}, err
	}
	defer peer.Close()
	// The instant is fixed once the peer runs (its start is set-up too).
	at := burstAt(2 * time.Second)
	if err := peer.setBurst(at); err != nil {
		return lagStats{}, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost = 0, conns, conns
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	urls := make([]string, tasks)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/t/floor%06d", peer.URL, i)
	}
	sleepUntil(ctx, at)
	var wg sync.WaitGroup
	for i := 0; i < tasks; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(urls[i])
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	st, err := peer.stats()
	if err != nil {
		return lagStats{}, err
	}
	if len(st.Arrivals) < tasks {
		return lagStats{}, fmt.Errorf("bare fan-out: %d of %d requests arrived", len(st.Arrivals), tasks)
	}
	return statsOf(st.Arrivals), nil
}

// herdScenario is issue 28's herd: 100,000 HTTP tasks firing at one instant
// on three worker engines whose capacity fits the burst (their max
// concurrency drains it within the tasks' timeout). None may be skipped by
// the limiter, and the rate at which runs get through must not fall while
// tens of thousands wait: the second tenth of the arrivals comes as fast as
// the ninth.
func (b *bench) herdScenario(ctx context.Context) []row {
	tasks := b.pick(100_000, 6_000)
	sp := burstSpec{tasks: tasks, workers: 3, maxc: 100, warm: time.Duration(b.pick(25, 5)) * time.Second, timeout: 120 * time.Second}
	name := fmt.Sprintf("herd: %s HTTP tasks firing at one instant on 3 workers, --maxc %d, timeout %s", fmtInt(tasks), sp.maxc, sp.timeout)
	settle()
	r, err := b.burstWorkers(ctx, sp, filepath.Join(b.tmp, "herd"))
	if err != nil {
		return []row{lateRow(name, err)}
	}
	b.logf("herd: %s; %d skipped %s; %.0f runs/s early, %.0f late; peak RSS %s (%s before the fire); peak goroutines %d",
		fmtLag(r.arrival), r.skipped, r.skipWhy, r.early, r.late, fmtMB(r.rss), fmtMB(r.base), r.goroutines)
	flat := r.late >= r.early/2 && r.early >= r.late/2
	rows := []row{
		{name, fmt.Sprintf("%s arrived, %d skipped; all in %s (p50 %s)", fmtInt(r.arrival.n), r.skipped, fmtDur(r.arrival.max), fmtDur(r.arrival.p50)),
			"none skipped", verdict(r.skipped == 0 && r.arrival.n == tasks)},
		{"  herd: runs/s with the queue long (2nd tenth) and nearly drained (9th tenth)", fmt.Sprintf("%.0f / %.0f", r.early, r.late),
			"flat (within 2×)", verdict(flat)},
		{fmt.Sprintf("  herd: peak RSS of the process (3 workers, %s tasks) from the fire on; peak goroutines", fmtInt(tasks)),
			fmt.Sprintf("%s (%s before the fire); %s goroutines", fmtMB(r.rss), fmtMB(r.base), fmtInt(r.goroutines)), "-", Info},
	}
	// The issue's own setting: the default timeout of 10 s, which the
	// same burst fits only if the runs keep flowing.
	sp.timeout = 10 * time.Second
	name = fmt.Sprintf("  herd with a timeout of %s (the wait for a slot included)", sp.timeout)
	settle()
	if r, err = b.burstWorkers(ctx, sp, filepath.Join(b.tmp, "herd10")); err != nil {
		return append(rows, lateRow(name, err))
	}
	b.logf("herd, timeout 10s: %s; %d skipped %s; %.0f runs/s early, %.0f late; peak RSS %s; peak goroutines %d",
		fmtLag(r.arrival), r.skipped, r.skipWhy, r.early, r.late, fmtMB(r.rss), r.goroutines)
	return append(rows, row{name, fmt.Sprintf("%s arrived, %d skipped; %.0f / %.0f runs/s; peak RSS %s, %s goroutines",
		fmtInt(r.arrival.n), r.skipped, r.early, r.late, fmtMB(r.rss), fmtInt(r.goroutines)), "-", Info})
}
