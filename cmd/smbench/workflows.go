package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// workflowShape is the DAG of every workflow of the scenario, in its
// definition order: a fans out to b, c, d, which fan in to e; e fans out
// to f, g, h, which fan in to i; then j.
var workflowShape = []struct {
	name  string
	after []string
}{
	{"a", nil},
	{"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"a"}},
	{"e", []string{"b", "c", "d"}},
	{"f", []string{"e"}}, {"g", []string{"e"}}, {"h", []string{"e"}},
	{"i", []string{"f", "g", "h"}},
	{"j", []string{"i"}},
}

// workflowShapeText names workflowShape in the rows.
const workflowShapeText = "a → b,c,d → e → f,g,h → i → j"

// workflowStarters is how many callers start the runs at once.
const workflowStarters = 16

// workflowsScenario is the workflows figure: 1,000 workflows of 10
// steps (HTTP calls to a loopback target) started in the same second on an
// in-process master, run by two worker processes; for every step after
// another, the time from its last parent's end to its start (both as the
// workers reported them), and the master's CPU per step. A step with
// several parents (fan-in) counts from the last one's end: the earlier
// ones' wait for it is not the engine's. The same figure for runs one at
// a time, before, is the floor the engine's design sets without load.
func (b *bench) workflowsScenario(ctx context.Context) []row {
	n, alone := b.pick(1000, 20), b.pick(20, 5)
	var rows []row
	for _, key := range []string{"sqlite", "mysql"} {
		label, goal := "SQLite", 50*time.Millisecond
		if key == "mysql" {
			label, goal = "MariaDB", 100*time.Millisecond
		}
		target := fmt.Sprintf("p99 <= %d ms", goal.Milliseconds())
		name := fmt.Sprintf("workflows, %s: %s runs of 10 steps (%s), all started at one instant by %d callers; a step's start − its last parent's end",
			label, fmtInt(n), workflowShapeText, workflowStarters)
		cpuWhat := "the in-process master, SQLite's engine included"
		if key == "mysql" {
			cpuWhat = "the in-process master; the MariaDB server's CPU not counted"
		}
		if key == "mysql" && b.opt.MySQL == "" {
			rows = append(rows, row{name, "no -mysql DSN (nor $SM_TEST_MYSQL_DSN)", target, Skip})
			continue
		}
		var r workflowsResult
		var err error
		// Labelled so that a CPU profile tells the databases apart
		// (pprof -tagfocus workflows=MariaDB): the master's goroutines,
		// its HTTP server's included, inherit the label.
		pprof.Do(ctx, pprof.Labels("workflows", label), func(ctx context.Context) {
			r, err = b.workflowsRun(ctx, key, n, alone)
		})
		if err != nil {
			rows = append(rows, errRow(name, err))
			continue
		}
		b.logf("%s: store statements per step: %s", label, perStep(r.stmts, r.steps))
		b.logf("%s: %s; alone %s; started over %s; all ended %s after the first start; master CPU %s, workers %s",
			label, fmtLag(r.burst.lag), fmtLag(r.alone.lag), fmtDur(r.startSpread), fmtDur(r.wall), fmtDur(r.cpuMaster), fmtDur(r.cpuWorkers))
		steps := time.Duration(r.steps)
		parts := func(l stepLatency) string {
			return fmt.Sprintf("%s / %s / %s; %s / %s / %s", fmtDur(l.recorded.p50), fmtDur(l.sent.p50), fmtDur(l.started.p50),
				fmtDur(l.recorded.p99), fmtDur(l.sent.p99), fmtDur(l.started.p99))
		}
		rows = append(rows,
			row{name, fmt.Sprintf("%s (%s steps, 1 run)", fmtLag(r.burst.lag), fmtInt(r.burst.lag.n)), target, verdict(r.burst.lag.p99 <= goal)},
			row{fmt.Sprintf("  %s: of it, until the master recorded the parent's end / sent the step / the worker started it (p50; p99)", label),
				parts(r.burst), "-", Info},
			row{fmt.Sprintf("  %s: master CPU per step (%s; the workers are processes of their own)", label, cpuWhat),
				fmt.Sprintf("%s (%s for %s steps; %.1f store statements per step; the two workers %s per step)", fmtDur(r.cpuMaster/steps),
					fmtDur(r.cpuMaster), fmtInt(r.steps), float64(total(r.stmts))/float64(r.steps), fmtDur(r.cpuWorkers/steps)), "-", Info},
			row{fmt.Sprintf("  %s: wall time, from the first start call to the last run's end (the %s start calls took %s)", label, fmtInt(n), fmtDur(r.startSpread)),
				fmt.Sprintf("%s (%.0f steps/s)", fmtDur(r.wall), float64(r.steps)/r.wall.Seconds()), "-", Info},
			row{fmt.Sprintf("  %s: the same latency, %d runs one at a time before (no load), and its three parts (p50; p99)", label, alone),
				fmt.Sprintf("%s; %s", fmtLag(r.alone.lag), parts(r.alone)), "-", Info},
		)
	}
	return rows
}

// workflowsResult is one measurement.
type workflowsResult struct {
	burst, alone          stepLatency // the runs started at once; those run one at a time
	steps                 int         // steps of the runs started at once
	stmts                 map[string]int64
	startSpread           time.Duration
	wall                  time.Duration // from the first start call to the last run's end
	cpuMaster, cpuWorkers time.Duration
}

// stepLatency is, for the steps after another of some workflow runs, the
// time from the last parent's end to the step's start (lag), and its
// three parts.
type stepLatency struct {
	lag, recorded, sent, started lagStats
	lastEnd                      time.Time // of the runs
}

// workflowsRun runs alone workflows of workflowShape one at a time, then n
// of them at once, on a fresh database (key: "sqlite" or a server's key).
func (b *bench) workflowsRun(ctx context.Context, key string, n, alone int) (workflowsResult, error) {
	var res workflowsResult
	bin, err := b.binaryPath(ctx)
	if err != nil {
		return res, err
	}
	stmts := newQueryCounter()
	e, err := b.newIngestEnv(ctx, key, stmts)
	if err != nil {
		return res, err
	}
	defer e.Close()
	// The steps' HTTP target is a child process (the lag peer, whose
	// other paths answer 200 {}), so that its CPU is not counted as the
	// master's.
	peer, err := startLagPeer(time.Now(), 0)
	if err != nil {
		return res, err
	}
	defer peer.Close()

	// Two worker processes, registered with the master; each can run
	// every run's widest level at once.
	prefix := randHex(3)
	var workers []*proc
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	var names []string
	for i := range 2 {
		name := fmt.Sprintf("wf-%s-%d", prefix, i)
		w, _, err := startProcEnv(ctx, bin, workerEnv, workerServing, "worker", "--identity", name, "--ip", "127.0.0.1", "--port", "0",
			"--master", e.srv.URL, "--cluster-key", benchClusterKey, "--data-dir", filepath.Join(b.tmp, name), "--maxc", fmt.Sprint(max(100, 3*n)))
		if err != nil {
			return res, err
		}
		workers, names = append(workers, w), append(names, name)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes, err := store.ListNodesByStatus(ctx, e.st.DB, store.StatusRunning)
		if err != nil {
			return res, err
		}
		if len(nodes) >= len(workers) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("%d of %d workers running after 60s:\n%s", len(nodes), len(workers), workers[0].tail())
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

	// One task per step of every workflow (a workflow's own tasks, as
	// distinct workflows have), created stopped through the engine's bulk
	// save; either worker may run each.
	tasks := make([]master.TaskInput, 0, n*len(workflowShape))
	for i := range n {
		for _, s := range workflowShape {
			tasks = append(tasks, master.TaskInput{TaskDef: protocol.TaskDef{
				Title: fmt.Sprintf("smbench workflow %d step %s", i, s.name), Type: protocol.TaskHTTP,
				Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
				HTTP:     &protocol.HTTPSpec{Method: "GET", URL: peer.URL + "/wf/" + s.name},
				Timeout:  protocol.Duration(30 * time.Second),
			}, Executors: names})
		}
	}
	var taskIDs []string
	for lo := 0; lo < len(tasks); lo += master.MaxBulkTasks {
		out, err := e.m.Tasks().Save(ctx, tasks[lo:min(lo+master.MaxBulkTasks, len(tasks))], false, "smbench")
		if err != nil {
			return res, fmt.Errorf("save the steps' tasks: %w", err)
		}
		for _, r := range out {
			if !r.OK {
				return res, fmt.Errorf("a step's task was not saved: %s %v", r.Error, r.Fields)
			}
			taskIDs = append(taskIDs, r.ID)
		}
	}
	wfIDs := make([]string, n)
	for i := range n {
		steps := make([]master.WorkflowStep, len(workflowShape))
		for j, s := range workflowShape {
			steps[j] = master.WorkflowStep{Name: s.name, Task: taskIDs[i*len(workflowShape)+j]}
			for _, p := range s.after {
				steps[j].After = append(steps[j].After, master.StepEdge{Step: p})
			}
		}
		w, err := e.m.Workflows().Create(ctx, master.WorkflowInput{WorkflowDef: master.WorkflowDef{
			Title: fmt.Sprintf("smbench %s %d", prefix, i), Steps: steps}})
		if err != nil {
			return res, fmt.Errorf("create workflow %d: %w", i, err)
		}
		wfIDs[i] = w.ID
	}

	// The floor: runs one at a time, each waited for.
	var aloneIDs []string
	for i := range alone {
		r, err := e.m.Workflows().RunNow(ctx, wfIDs[i%n], nil)
		if err != nil {
			return res, fmt.Errorf("start workflow %d: %w", i, err)
		}
		aloneIDs = append(aloneIDs, r.ID)
		for end := time.Now().Add(30 * time.Second); ; {
			wr, _, err := store.GetWorkflowRun(ctx, e.st.DB, r.ID)
			if err != nil {
				return res, err
			}
			if wr.Status != store.WorkflowRunning {
				break
			}
			if time.Now().After(end) || ctx.Err() != nil {
				return res, fmt.Errorf("workflow run %s, alone, still in progress after 30s", r.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if res.alone, err = workflowLatency(ctx, e, aloneIDs); err != nil {
		return res, fmt.Errorf("runs one at a time: %w", err)
	}
	e.logs.reset()
	settle()

	// Every run is started at once, from a whole second on, by
	// workflowStarters callers (RunNow sends a run's first step before it
	// returns: how long the calls take is reported).
	sleepUntil(ctx, time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second))
	cpu0, _ := procCPU(os.Getpid())
	cw0 := workersCPU(workers)
	pool0 := e.st.DB.DB.Stats()
	stmts0 := stmts.counts()
	runs0, err := countRuns(ctx, e.st.DB)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	ids := make([]string, n)
	next := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range workflowStarters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// After a failure the callers keep taking numbers without
			// starting, so the loop handing them out never blocks.
			for i := range next {
				if failed.Load() != nil {
					continue
				}
				r, err := e.m.Workflows().RunNow(ctx, wfIDs[i], nil)
				if err != nil {
					err = fmt.Errorf("start workflow %d: %w", i, err)
					failed.CompareAndSwap(nil, &err)
					continue
				}
				ids[i] = r.ID
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	res.startSpread = time.Since(t0)
	if p := failed.Load(); p != nil {
		return res, *p
	}

	// Every run ends; a stall (no step's run stored for a minute) is an
	// error.
	res.steps = n * len(workflowShape)
	db := e.st.DB
	lastRuns, lastMove, lastLog := -1, time.Now(), time.Now()
	for {
		running, err := db.NewSelect().Model((*store.WorkflowRun)(nil)).Where("status = ?", store.WorkflowRunning).Count(ctx)
		if err != nil {
			return res, err
		}
		if running == 0 {
			break
		}
		runs, err := countRuns(ctx, db)
		if err != nil {
			return res, err
		}
		runs -= runs0
		if runs != lastRuns {
			lastRuns, lastMove = runs, time.Now()
		}
		if time.Since(lastLog) >= 10*time.Second {
			b.logf("workflows: %d of %d runs in progress, %d of %d steps' runs stored", running, n, runs, res.steps)
			lastLog = time.Now()
		}
		if time.Since(lastMove) > time.Minute || ctx.Err() != nil {
			w, first := e.logs.warnings()
			return res, fmt.Errorf("%d of %d workflow runs still in progress, no step's run stored for a minute (%d of %d; %d warnings: %v)",
				running, n, runs, res.steps, w, first)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpu1, _ := procCPU(os.Getpid())
	res.cpuMaster, res.cpuWorkers = cpu1-cpu0, workersCPU(workers)-cw0
	// How the store's connection pool fared: a connection closed as past
	// the idle limit was opened for a burst and is opened again for the
	// next one.
	pool := e.st.DB.DB.Stats()
	res.stmts = stmts.since(stmts0)
	b.logf("workflows: store pool: %d connections open at the end, %d closed as past the idle limit, %d waits for a connection (%s)",
		pool.OpenConnections, pool.MaxIdleClosed-pool0.MaxIdleClosed, pool.WaitCount-pool0.WaitCount,
		fmtDur(pool.WaitDuration-pool0.WaitDuration))
	if w, first := e.logs.warnings(); w > 0 {
		b.logf("workflows: the master logged %d warnings: %v", w, first)
	}
	if res.burst, err = workflowLatency(ctx, e, ids); err != nil {
		return res, err
	}
	res.wall = res.burst.lastEnd.Sub(t0)
	return res, nil
}

// workersCPU sums the CPU time the worker processes have used so far.
func workersCPU(ws []*proc) time.Duration {
	var sum time.Duration
	for _, w := range ws {
		c, _ := procCPU(w.cmd.Process.Pid)
		sum += c
	}
	return sum
}

// workflowLatency reads the ended workflow runs ids back, checks that
// each succeeded with every step run once, and measures, for each step
// after another, the time from the last parent's end (its run's
// ended_at, the worker's clock) to the step's run's start (started_at,
// the worker's clock, here the same machine's), in three parts: until the
// master recorded the parent's end (the parent step's updated_at, last
// set when it ended), until the master sent the step (the step's
// started_at, set when it is dispatched), until the worker started it.
func workflowLatency(ctx context.Context, e *ingestEnv, ids []string) (stepLatency, error) {
	var out stepLatency
	db := e.st.DB
	type stepKey struct{ run, name string }
	taskRun := map[stepKey]store.Run{}
	step := map[stepKey]store.WorkflowStep{}
	var wruns []store.WorkflowRun
	// In chunks: a statement's bound parameters are limited.
	for lo := 0; lo < len(ids); lo += 500 {
		chunk := ids[lo:min(lo+500, len(ids))]
		var rs []store.WorkflowRun
		if err := db.NewSelect().Model(&rs).Column("id", "status", "ended_at").Where("id IN (?)", bun.In(chunk)).Scan(ctx); err != nil {
			return out, err
		}
		wruns = append(wruns, rs...)
		var runs []store.Run
		if err := db.NewSelect().Model(&runs).Column("workflow_run", "workflow_step", "started_at", "ended_at").
			Where("workflow_run IN (?)", bun.In(chunk)).Scan(ctx); err != nil {
			return out, err
		}
		for _, r := range runs {
			k := stepKey{r.WorkflowRun, r.WorkflowStep}
			if _, dup := taskRun[k]; dup {
				return out, fmt.Errorf("step %s of workflow run %s ran twice", r.WorkflowStep, r.WorkflowRun)
			}
			taskRun[k] = r
		}
		var steps []store.WorkflowStep
		if err := db.NewSelect().Model(&steps).Column("run_id", "name", "state", "output", "started_at", "updated_at").
			Where("run_id IN (?)", bun.In(chunk)).Scan(ctx); err != nil {
			return out, err
		}
		for _, s := range steps {
			step[stepKey{s.RunID, s.Name}] = s
		}
	}
	if len(wruns) != len(ids) {
		return out, fmt.Errorf("%d workflow runs stored, want %d", len(wruns), len(ids))
	}
	var lag, recorded, sent, started []time.Duration
	for _, r := range wruns {
		if r.Status != store.WorkflowSuccess {
			for _, s := range workflowShape {
				if st := step[stepKey{r.ID, s.name}]; st.State != store.StepSuccess {
					return out, fmt.Errorf("workflow run %s ended %s: step %s %s: %.200s", r.ID, r.Status, s.name, st.State, st.Output)
				}
			}
			return out, fmt.Errorf("workflow run %s ended %s", r.ID, r.Status)
		}
		if r.EndedAt.After(out.lastEnd) {
			out.lastEnd = r.EndedAt
		}
		for _, s := range workflowShape {
			if len(s.after) == 0 {
				continue
			}
			child, ok := taskRun[stepKey{r.ID, s.name}]
			if !ok {
				return out, fmt.Errorf("step %s of workflow run %s has no run", s.name, r.ID)
			}
			var parentEnd, parentRecorded time.Time
			for _, p := range s.after {
				pr, ok := taskRun[stepKey{r.ID, p}]
				if !ok {
					return out, fmt.Errorf("step %s of workflow run %s has no run", p, r.ID)
				}
				if pr.EndedAt.After(parentEnd) {
					parentEnd = pr.EndedAt
				}
				if u := step[stepKey{r.ID, p}].UpdatedAt; u.After(parentRecorded) {
					parentRecorded = u
				}
			}
			dispatched := step[stepKey{r.ID, s.name}].StartedAt
			lag = append(lag, child.StartedAt.Sub(parentEnd))
			recorded = append(recorded, parentRecorded.Sub(parentEnd))
			sent = append(sent, dispatched.Sub(parentRecorded))
			started = append(started, child.StartedAt.Sub(dispatched))
		}
	}
	if len(lag) == 0 {
		return out, errors.New("no step after another ran")
	}
	out.lag, out.recorded, out.sent, out.started = statsOf(lag), statsOf(recorded), statsOf(sent), statsOf(started)
	return out, nil
}

// queryCounter is a query hook counting the store's statements by
// operation (SELECT, UPDATE, BEGIN, …).
type queryCounter struct {
	ops   map[string]*atomic.Int64 // fixed at creation: read without a lock
	other atomic.Int64
}

func newQueryCounter() *queryCounter {
	q := &queryCounter{ops: map[string]*atomic.Int64{}}
	for _, op := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT", "ROLLBACK"} {
		q.ops[op] = new(atomic.Int64)
	}
	return q
}

// BeforeQuery does nothing: a statement is counted once it ran.
func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

// AfterQuery counts the statement under its operation.
func (q *queryCounter) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if c := q.ops[e.Operation()]; c != nil {
		c.Add(1)
		return
	}
	q.other.Add(1)
}

// counts returns the counts so far, by operation.
func (q *queryCounter) counts() map[string]int64 {
	out := map[string]int64{"other": q.other.Load()}
	for op, c := range q.ops {
		out[op] = c.Load()
	}
	return out
}

// since returns the counts since before.
func (q *queryCounter) since(before map[string]int64) map[string]int64 {
	out := q.counts()
	for op := range out {
		out[op] -= before[op]
	}
	return out
}

// total sums counts.
func total(counts map[string]int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// perStep prints counts divided by steps, largest first.
func perStep(counts map[string]int64, steps int) string {
	ops := make([]string, 0, len(counts))
	for op, c := range counts {
		if c > 0 {
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return counts[ops[i]] > counts[ops[j]] })
	var b strings.Builder
	fmt.Fprintf(&b, "%.1f", float64(total(counts))/float64(steps))
	for i, op := range ops {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s %.1f", sep, op, float64(counts[op])/float64(steps))
	}
	if len(ops) > 0 {
		b.WriteString(")")
	}
	return b.String()
}
