package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// lagRecorder keeps lag samples whose scheduled time falls in [from, to).
type lagRecorder struct {
	mu       sync.Mutex
	from, to time.Time
	samples  []time.Duration
}

func newLagRecorder(from time.Time, d time.Duration, capacity int) *lagRecorder {
	return &lagRecorder{from: from, to: from.Add(d), samples: make([]time.Duration, 0, capacity)}
}

func (l *lagRecorder) add(scheduled, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if scheduled.Before(l.from) || !scheduled.Before(l.to) {
		return
	}
	l.samples = append(l.samples, at.Sub(scheduled))
}

func (l *lagRecorder) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.samples)
}

// lagStats summarises one measurement.
type lagStats struct {
	p50, p99, max time.Duration
	n             int
	// CPU used per second of the window by the worker's process and by the
	// lag peer (the tasks' HTTP target and the fake master), when measured.
	cpuWorker, cpuPeer time.Duration
}

func (l *lagRecorder) stats() lagStats {
	l.mu.Lock()
	s := sortDurations(l.samples)
	l.mu.Unlock()
	if len(s) == 0 {
		return lagStats{}
	}
	return lagStats{p50: percentile(s, 0.50), p99: percentile(s, 0.99), max: s[len(s)-1], n: len(s)}
}

// secondOf names the cron second a timer firing at t belongs to (a timer may
// fire a little early; the worker's own scheduledFire allows 200 ms the same way).
func secondOf(t time.Time) time.Time { return t.Add(200 * time.Millisecond).Truncate(time.Second) }

// window starts at the first whole second after a warm-up.
func lagWindow(warm time.Duration) time.Time {
	return time.Now().Add(warm).Truncate(time.Second).Add(time.Second)
}

// The lag peer is a child process (smbench itself, started with
// SMBENCH_ROLE=lagpeer) that serves the tasks' HTTP target and a fake master
// taking the worker's run reports, so that neither shares the measured
// worker's Go runtime. It records, for runs scheduled in its window, the run
// reports' started_at minus scheduled_at and the requests' arrival minus their
// second, and hands them over at GET /stats.
const (
	roleEnv    = "SMBENCH_ROLE"
	lagFromEnv = "SMBENCH_LAG_FROM"
	lagForEnv  = "SMBENCH_LAG_FOR"
	// burstAtEnv, when set, makes the peer count every request's arrival
	// from that one instant (UnixNano): the burst scenario's fire time.
	// POST /burst?at=<UnixNano> moves it (and the window) to the instant
	// fixed once the workers are set up.
	burstAtEnv  = "SMBENCH_BURST_AT"
	lagPeerRole = "lagpeer"
)

// lagPeerStats is the answer of GET /stats.
type lagPeerStats struct {
	Starts   []time.Duration `json:"starts"`
	Arrivals []time.Duration `json:"arrivals"`
	// Skipped counts the run reports that said skipped, and SkipWhy the
	// first such report's output.
	Skipped int    `json:"skipped"`
	SkipWhy string `json:"skip_why,omitempty"`
}

// runRole runs the child role named by SMBENCH_ROLE, if any, and reports whether it did.
func runRole() bool {
	switch os.Getenv(roleEnv) {
	case lagPeerRole:
		if err := serveLagPeer(); err != nil {
			fmt.Fprintln(os.Stderr, "smbench lag peer:", err)
			os.Exit(1)
		}
		return true
	}
	return false
}

func serveLagPeer() error {
	from, err := strconv.ParseInt(os.Getenv(lagFromEnv), 10, 64)
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(os.Getenv(lagForEnv))
	if err != nil {
		return err
	}
	starts := newLagRecorder(time.Unix(0, from), d, 0)
	arrivals := newLagRecorder(time.Unix(0, from), d, 0)
	// burstAt is the burst's instant (UnixNano), 0 for none.
	var burstAt atomic.Int64
	if v := os.Getenv(burstAtEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		burstAt.Store(n)
	}
	var skipped int
	var skipWhy string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == protocol.PathMasterRuns:
			var req protocol.RunsRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			for i := range req.Runs {
				if req.Runs[i].Result == protocol.ResultSkipped {
					starts.mu.Lock()
					if skipped++; skipWhy == "" {
						skipWhy = req.Runs[i].Output
					}
					starts.mu.Unlock()
					continue
				}
				starts.add(req.Runs[i].ScheduledAt, req.Runs[i].StartedAt)
			}
			_ = json.NewEncoder(rw).Encode(protocol.RunsResponse{Accepted: len(req.Runs)})
		case r.URL.Path == "/stats":
			starts.mu.Lock()
			arrivals.mu.Lock()
			_ = json.NewEncoder(rw).Encode(lagPeerStats{Starts: starts.samples, Arrivals: arrivals.samples, Skipped: skipped, SkipWhy: skipWhy})
			arrivals.mu.Unlock()
			starts.mu.Unlock()
		case r.URL.Path == "/burst" && r.Method == http.MethodPost:
			n, err := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64)
			if err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			at := time.Unix(0, n)
			for _, l := range []*lagRecorder{starts, arrivals} {
				l.mu.Lock()
				l.from, l.to = at, at.Add(d)
				l.mu.Unlock()
			}
			burstAt.Store(n)
			rw.WriteHeader(http.StatusNoContent)
		case strings.HasPrefix(r.URL.Path, "/t/"):
			now := time.Now()
			if n := burstAt.Load(); n != 0 {
				arrivals.add(time.Unix(0, n), now)
			} else {
				arrivals.add(secondOf(now), now)
			}
			rw.WriteHeader(http.StatusNoContent)
		default:
			_, _ = rw.Write([]byte("{}"))
		}
	})}
	fmt.Printf("listening http://%s\n", ln.Addr())
	go func() {
		// The parent closes our stdin (or dies): stop.
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// lagPeer is the running child process.
type lagPeer struct {
	cmd   *exec.Cmd
	stdin io.Closer
	URL   string
}

func startLagPeer(from time.Time, d time.Duration, env ...string) (*lagPeer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+lagPeerRole, fmt.Sprintf("%s=%d", lagFromEnv, from.UnixNano()), lagForEnv+"="+d.String())
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &lagPeer{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		p.Close()
		return nil, fmt.Errorf("lag peer did not start (%q): %v", line, err)
	}
	p.URL = strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	return p, nil
}

// setBurst moves the peer's burst instant (and its window) to at.
func (p *lagPeer) setBurst(at time.Time) error {
	resp, err := http.Post(fmt.Sprintf("%s/burst?at=%d", p.URL, at.UnixNano()), "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("lag peer: POST /burst: %s", resp.Status)
	}
	return nil
}

func (p *lagPeer) stats() (lagPeerStats, error) {
	var st lagPeerStats
	resp, err := http.Get(p.URL + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (p *lagPeer) Close() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func statsOf(samples []time.Duration) lagStats {
	s := sortDurations(samples)
	if len(s) == 0 {
		return lagStats{}
	}
	return lagStats{p50: percentile(s, 0.50), p99: percentile(s, 0.99), max: s[len(s)-1], n: len(s)}
}

// lagWorker runs `tasks` HTTP tasks firing every second on one in-process
// worker engine for d and returns the lag of the runs' start (the run
// reports' started_at minus scheduled_at) and of the requests' arrival at the
// target endpoint (both recorded by the lag peer process).
func (b *bench) lagWorker(ctx context.Context, tasks, maxc int, d time.Duration, dir string) (start, arrival lagStats, err error) {
	return b.lagWorkerOf(ctx, tasks, maxc, d, dir, nil, func(i int, peerURL string) protocol.TaskSpec {
		return protocol.TaskSpec{TaskDef: httpTask(fmt.Sprintf("lag%05d", i), "* * * * * *", peerURL), Executors: 1}
	})
}

// lagWorkerOf is lagWorker for the tasks spec makes (the i-th, given the
// lag peer's URL), on a worker that runs the task types allow.
func (b *bench) lagWorkerOf(ctx context.Context, tasks, maxc int, d time.Duration, dir string, allow []string,
	spec func(i int, peerURL string) protocol.TaskSpec) (start, arrival lagStats, err error) {
	from := lagWindow(3 * time.Second)
	peer, err := startLagPeer(from, d)
	if err != nil {
		return start, arrival, err
	}
	defer peer.Close()

	log, logs := b.newLogger()
	w, err := worker.New(worker.Config{
		Identity: "lagw", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: maxc,
		MasterURL: peer.URL, ClusterKey: benchClusterKey, DataDir: dir, StopTimeout: 5 * time.Second, AllowTypes: allow,
	}, log)
	if err != nil {
		return start, arrival, err
	}
	go w.Run(ctx) // until the Stop below; Startup waits for it
	specs := make([]protocol.TaskSpec, tasks)
	for i := range specs {
		specs[i] = spec(i, peer.URL)
	}
	if err := w.Startup(ctx, protocol.StartupRequest{Tasks: specs}); err != nil {
		return start, arrival, err
	}
	want := tasks * int(d/time.Second)
	sleepUntil(ctx, from)
	cw0, _ := procCPU(os.Getpid())
	cp0, _ := procCPU(peer.cmd.Process.Pid)
	sleepUntil(ctx, from.Add(d))
	cw1, _ := procCPU(os.Getpid())
	cp1, _ := procCPU(peer.cmd.Process.Pid)
	sleepUntil(ctx, from.Add(d).Add(time.Second))
	// Reports linger up to 100 ms before delivery; on a loaded machine
	// (-short, in CI beside other tests) they may take longer to arrive.
	wait := 10 * time.Second
	if b.opt.Short {
		wait = 30 * time.Second
	}
	var st lagPeerStats
	for deadline := time.Now().Add(wait); ; {
		st, err = peer.stats()
		if err != nil || len(st.Starts) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.Stop(sctx)
	if err != nil {
		return start, arrival, err
	}
	if got := len(st.Starts); got < want {
		n, first := logs.warnings()
		return start, arrival, fmt.Errorf("%d of %d runs reported (%d warnings: %v)", got, want, n, first)
	}
	start, arrival = statsOf(st.Starts), statsOf(st.Arrivals)
	secs := int64(d / time.Second)
	start.cpuWorker, start.cpuPeer = (cw1-cw0)/time.Duration(secs), (cp1-cp0)/time.Duration(secs)
	return start, arrival, nil
}

// lagGocron runs the same load on bare gocron v2: `tasks` jobs on
// CronJob("* * * * * *", true), each recording its start minus the second.
func lagGocron(ctx context.Context, tasks int, d time.Duration) (lagStats, error) {
	from := lagWindow(3 * time.Second)
	rec := newLagRecorder(from, d, tasks*int(d/time.Second))
	s, err := gocron.NewScheduler(gocron.WithLocation(time.UTC))
	if err != nil {
		return lagStats{}, err
	}
	for i := 0; i < tasks; i++ {
		_, err := s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
			now := time.Now()
			rec.add(secondOf(now), now)
		}))
		if err != nil {
			_ = s.Shutdown()
			return lagStats{}, err
		}
	}
	s.Start()
	sleepUntil(ctx, from.Add(d).Add(time.Second))
	_ = s.Shutdown()
	want := tasks * int(d/time.Second)
	if got := rec.count(); got < want {
		return lagStats{}, fmt.Errorf("bare gocron: %d of %d runs", got, want)
	}
	return rec.stats(), nil
}

// lagGocronFanOut runs the same load as one gocron job per distinct schedule:
// a single CronJob("* * * * * *") that starts `tasks` goroutines, each
// recording its start minus the second. It is the floor of a worker design
// that groups tasks sharing a schedule into one gocron job.
func lagGocronFanOut(ctx context.Context, tasks int, d time.Duration) (lagStats, error) {
	from := lagWindow(3 * time.Second)
	rec := newLagRecorder(from, d, tasks*int(d/time.Second))
	s, err := gocron.NewScheduler(gocron.WithLocation(time.UTC))
	if err != nil {
		return lagStats{}, err
	}
	_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
		for i := 0; i < tasks; i++ {
			go func() {
				now := time.Now()
				rec.add(secondOf(now), now)
			}()
		}
	}))
	if err != nil {
		_ = s.Shutdown()
		return lagStats{}, err
	}
	s.Start()
	sleepUntil(ctx, from.Add(d).Add(time.Second))
	_ = s.Shutdown()
	want := tasks * int(d/time.Second)
	if got := rec.count(); got < want {
		return lagStats{}, fmt.Errorf("gocron fan-out: %d of %d runs", got, want)
	}
	return rec.stats(), nil
}

// lagFanOutHTTP is bare gocron with the tasks' real work: one gocron job
// whose fire starts `tasks` goroutines, each recording its start minus the
// second and then sending the HTTP GET a task sends, through a transport that
// keeps idlePerHost idle connections per host. It returns the start lag and
// the lag of the requests' arrival at the lag peer.
func lagFanOutHTTP(ctx context.Context, tasks, idlePerHost int, d time.Duration) (start, arrival lagStats, err error) {
	from := lagWindow(3 * time.Second)
	peer, err := startLagPeer(from, d)
	if err != nil {
		return start, arrival, err
	}
	defer peer.Close()
	rec := newLagRecorder(from, d, tasks*int(d/time.Second))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = idlePerHost
	if idlePerHost > tr.MaxIdleConns {
		tr.MaxIdleConns = 0
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	s, err := gocron.NewScheduler(gocron.WithLocation(time.UTC))
	if err != nil {
		return start, arrival, err
	}
	urls := make([]string, tasks)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/t/fan%05d", peer.URL, i)
	}
	_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
		for i := 0; i < tasks; i++ {
			go func() {
				now := time.Now()
				rec.add(secondOf(now), now)
				resp, err := client.Get(urls[i])
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
	}))
	if err != nil {
		_ = s.Shutdown()
		return start, arrival, err
	}
	s.Start()
	sleepUntil(ctx, from.Add(d).Add(time.Second))
	_ = s.Shutdown()
	st, err := peer.stats()
	if err != nil {
		return start, arrival, err
	}
	want := tasks * int(d/time.Second)
	if got := len(st.Arrivals); got < want {
		return start, arrival, fmt.Errorf("gocron fan-out with GETs: %d of %d requests arrived", got, want)
	}
	return rec.stats(), statsOf(st.Arrivals), nil
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

func fmtLag(s lagStats) string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", fmtDur(s.p50), fmtDur(s.p99), fmtDur(s.max))
}

func medianLag(all []lagStats) lagStats {
	var p50, p99, mx, cw, cp []time.Duration
	n := 0
	for _, s := range all {
		p50, p99, mx = append(p50, s.p50), append(p99, s.p99), append(mx, s.max)
		cw, cp = append(cw, s.cpuWorker), append(cp, s.cpuPeer)
		n += s.n
	}
	return lagStats{p50: medianDur(p50), p99: medianDur(p99), max: medianDur(mx), n: n, cpuWorker: medianDur(cw), cpuPeer: medianDur(cp)}
}

// ratioP99 is a's p99 over b's.
func ratioP99(a, b lagStats) float64 { return float64(a.p99) / float64(max(b.p99, time.Microsecond)) }

// lagScenario measures the worker's trigger lag two ways, each beside bare
// gocron v2 running one job that fans out to as many goroutines, in the same
// run: the start lag of 1,000 HTTP tasks firing every second (a run's
// started_at minus its scheduled time, both stamped by the worker: no
// network in the figure), and the arrival lag of 500 HTTP tasks' requests at
// a loopback target (the bare side sends the same GETs).
func (b *bench) lagScenario(ctx context.Context) []row {
	tasks := b.pick(1000, 100)
	httpTasks := b.pick(500, 50)
	d := b.opt.LagFor
	var ws, wa, fs, was, has []lagStats
	var startRatios, arrivalRatios []float64
	startName := fmt.Sprintf("start lag: %s HTTP tasks firing every second on one worker, %s (run's started_at − scheduled time)", fmtInt(tasks), d)
	arrivalName := fmt.Sprintf("arrival lag: %s HTTP tasks firing every second, request arrival at a loopback target, %s", fmtInt(httpTasks), d)
	for i := 0; i < b.opt.Runs; i++ {
		settle()
		w, a, err := b.lagWorker(ctx, tasks, tasks, d, filepath.Join(b.tmp, fmt.Sprintf("lag%d", i)))
		if err != nil {
			return []row{errRow(startName, err)}
		}
		settle()
		f, err := lagGocronFanOut(ctx, tasks, d)
		if err != nil {
			return []row{errRow(startName, err)}
		}
		settle()
		_, wArr, err := b.lagWorker(ctx, httpTasks, httpTasks, d, filepath.Join(b.tmp, fmt.Sprintf("lagh%d", i)))
		if err != nil {
			return []row{errRow(arrivalName, err)}
		}
		settle()
		_, hArr, err := lagFanOutHTTP(ctx, httpTasks, httpTasks, d)
		if err != nil {
			return []row{errRow(arrivalName, err)}
		}
		b.logf("run %d: start %s | bare fan-out %s || arrival %s | bare fan-out + GET %s", i+1, fmtLag(w), fmtLag(f), fmtLag(wArr), fmtLag(hArr))
		ws, wa, fs, was, has = append(ws, w), append(wa, a), append(fs, f), append(was, wArr), append(has, hArr)
		startRatios = append(startRatios, ratioP99(w, f))
		arrivalRatios = append(arrivalRatios, ratioP99(wArr, hArr))
	}
	w, a, f, wArr, hArr := medianLag(ws), medianLag(wa), medianLag(fs), medianLag(was), medianLag(has)
	rows := []row{
		{startName, fmt.Sprintf("%s (%s runs); bare gocron p99 %s, ratio %.2f×", fmtLag(w), fmtInt(w.n), fmtDur(f.p99), medianF(startRatios)),
			"p99 < 5 ms", verdict(w.p99 < 5*time.Millisecond)},
		{fmt.Sprintf("  bare gocron v2, 1 job fanning out to %s goroutines (same runs)", fmtInt(tasks)), fmtLag(f), "reference", Info},
		{"  request arrival at the target in the start-lag runs", fmtLag(a), "-", Info},
		{"  CPU per second in the start-lag runs: worker process / target + fake master process",
			fmt.Sprintf("%s / %s (of 2,000 ms on 2 cores)", fmtDur(w.cpuWorker), fmtDur(w.cpuPeer)), "-", Info},
		{arrivalName, fmt.Sprintf("%s (%s requests); bare gocron p99 %s, ratio %.2f×", fmtLag(wArr), fmtInt(wArr.n), fmtDur(hArr.p99), medianF(arrivalRatios)),
			"p99 < 25 ms", verdict(wArr.p99 < 25*time.Millisecond)},
		{fmt.Sprintf("  bare gocron v2, 1 job fanning out to %s goroutines each sending the GET (same runs)", fmtInt(httpTasks)), fmtLag(hArr), "reference", Info},
	}
	if !b.opt.Short {
		// The old design for reference: one gocron job per task.
		dd := min(d, 20*time.Second)
		g, err := lagGocron(ctx, tasks, dd)
		name := fmt.Sprintf("  bare gocron v2, %s jobs (one per task, the design before fan-out), %s (1 run)", fmtInt(tasks), dd)
		if err != nil {
			rows = append(rows, errRow(name, err))
		} else {
			rows = append(rows, row{name, fmtLag(g), "reference", Info})
		}
		// The same load with the worker's default --maxc 20: runs queue for a slot.
		w, _, err := b.lagWorker(ctx, tasks, 20, dd, filepath.Join(b.tmp, "lagmaxc"))
		name = fmt.Sprintf("  start lag with the default --maxc 20, %s (1 run)", dd)
		if err != nil {
			rows = append(rows, errRow(name, err))
		} else {
			rows = append(rows, row{name, fmtLag(w), "-", Info})
		}
	}
	return rows
}
