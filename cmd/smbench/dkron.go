package main

// smbench -peer-dkron PATH: the same workload, N HTTP tasks firing every
// second on one node, run by our master + worker processes and by a Dkron
// agent (single server node), alternating systems round by round. One
// loopback HTTP target in this process counts the arrivals of each task in
// each second. Per N it prints, for both systems and as ratios (ours /
// Dkron): arrival lag p50/p99 (arrival − scheduled second), missed and
// doubled fires, CPU seconds per 1,000 runs and peak RSS, both summed over
// every process of the system (Dkron runs its HTTP executor as a plugin
// process). A system that dies (Dkron did at N = 500: too many open files),
// or stops answering, fails its round: reported with the reason its log
// gives, never waited for beyond a deadline.
// It never runs in CI: only with -peer-dkron.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// peerScenario is the Dkron comparison, registered only with -peer-dkron.
func peerScenario() scenario {
	return scenario{"dkron", "side by side with a Dkron agent: N HTTP tasks every second", (*bench).dkronScenario}
}

// peerEarly is how early an arrival may come and still belong to a second
// (a timer may fire a little early), as the lag scenario allows.
const peerEarly = 200 * time.Millisecond

// ---------------------------------------------------------------- target

// arrivals are the request times of one round, per task.
type arrivals struct {
	mu     sync.Mutex
	byTask map[string][]time.Time
}

func (a *arrivals) distinct() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byTask)
}

// peerTarget is the tasks' HTTP target: GET /<round>/t/<task>.
type peerTarget struct {
	srv    *http.Server
	url    string
	mu     sync.RWMutex
	rounds map[string]*arrivals
}

func startPeerTarget() (*peerTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &peerTarget{url: "http://" + ln.Addr().String(), rounds: map[string]*arrivals{}}
	t.srv = &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *peerTarget) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	at := time.Now()
	_, _ = io.Copy(io.Discard, r.Body)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) == 3 && parts[1] == "t" {
		t.mu.RLock()
		a := t.rounds[parts[0]]
		t.mu.RUnlock()
		if a != nil {
			a.mu.Lock()
			a.byTask[parts[2]] = append(a.byTask[parts[2]], at)
			a.mu.Unlock()
		}
	}
	rw.WriteHeader(http.StatusOK)
}

func (t *peerTarget) round(name string) *arrivals {
	a := &arrivals{byTask: map[string][]time.Time{}}
	t.mu.Lock()
	t.rounds[name] = a
	t.mu.Unlock()
	return a
}

func (t *peerTarget) drop(name string) {
	t.mu.Lock()
	delete(t.rounds, name)
	t.mu.Unlock()
}

func (t *peerTarget) Close() { _ = t.srv.Close() }

// attribute assigns each arrival of one task to the second it was scheduled
// for: the whole second at most peerEarly after it. An arrival in a second
// that has one already moves the earlier one back a second when that second
// has none and the lag stays under 2 s (a fire over 800 ms late), else it is
// a double. It returns the lag of every second of [from, from+secs) that had
// an arrival, how many had none and how many extra arrivals they got.
func attribute(times []time.Time, from time.Time, secs int) (lags []time.Duration, missed, doubled int) {
	times = slices.Clone(times)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	slot := map[int64]time.Time{}
	extra := map[int64]int{}
	for _, at := range times {
		s := at.Add(peerEarly).Truncate(time.Second).Unix()
		first, taken := slot[s]
		if !taken {
			slot[s] = at
			continue
		}
		if _, prevTaken := slot[s-1]; !prevTaken && first.Sub(time.Unix(s-1, 0)) < 2*time.Second {
			slot[s-1], slot[s] = first, at
			continue
		}
		extra[s]++
	}
	for i := 0; i < secs; i++ {
		s := from.Unix() + int64(i)
		at, ok := slot[s]
		if !ok {
			missed++
		} else {
			lags = append(lags, at.Sub(time.Unix(s, 0)))
		}
		doubled += extra[s]
	}
	return lags, missed, doubled
}

// ---------------------------------------------------------------- processes

// peerProc is a process started in a process group of its own, so that its
// children (Dkron's executor plugins) are measured and stopped with it.
type peerProc struct {
	name string
	cmd  *exec.Cmd
	log  *lineRing
	done chan struct{}
	err  error // the exit, once done is closed
}

// lineRing keeps the last lines a process wrote.
type lineRing struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

func (r *lineRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.part = append(r.part, p...)
	for {
		i := bytes.IndexByte(r.part, '\n')
		if i < 0 {
			break
		}
		r.lines = append(r.lines, string(r.part[:i]))
		r.part = r.part[i+1:]
		if len(r.lines) > 400 {
			r.lines = slices.Delete(r.lines, 0, 200)
		}
	}
	if len(r.part) > 64<<10 {
		r.part = r.part[:0]
	}
	return len(p), nil
}

// reason picks the line that says why a process died, else the last one.
func (r *lineRing) reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range []string{"too many open files", "panic", "fatal", "level=error", "error"} {
		for i := len(r.lines) - 1; i >= 0; i-- {
			if strings.Contains(strings.ToLower(r.lines[i]), key) {
				return strings.TrimSpace(r.lines[i])
			}
		}
	}
	if len(r.lines) > 0 {
		return strings.TrimSpace(r.lines[len(r.lines)-1])
	}
	return "no output"
}

// startPeerProc starts bin with TMPDIR set to tmp (Dkron's plugins leave
// their sockets there when killed).
func startPeerProc(name, tmp, bin string, args ...string) (*peerProc, error) {
	p := &peerProc{name: name, cmd: exec.Command(bin, args...), log: &lineRing{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited says how the process ended, or "" while it runs.
func (p *peerProc) exited() string {
	select {
	case <-p.done:
		return fmt.Sprintf("%s exited (%v): %.300s", p.name, p.err, p.log.reason())
	default:
		return ""
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after 15 s.
func (p *peerProc) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // children left behind
		return
	default:
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// groupUsage sums, over every live process of the process groups, the CPU
// used (own and reaped children's) and the resident memory.
func groupUsage(pgids []int) (cpu time.Duration, rss int64) {
	want := map[int]bool{}
	for _, g := range pgids {
		want[g] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	page := int64(os.Getpagesize())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 22 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		if !want[pgrp] {
			continue
		}
		var ticks int64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
		cpu += time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
		pages, _ := strconv.ParseInt(f[21], 10, 64)         // rss
		rss += pages * page
	}
	return cpu, rss
}

// freePort returns a loopback port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls url until it answers 200, the process exits or d passes.
func waitHTTP(ctx context.Context, url string, d time.Duration, procs ...*peerProc) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d)
	for {
		for _, p := range procs {
			if why := p.exited(); why != "" {
				return errors.New(why)
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s", url, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ---------------------------------------------------------------- systems

// procSet holds the processes a system started in a round; the round's
// sampler reads it while the system starts more.
type procSet struct {
	mu    sync.Mutex
	procs []*peerProc
}

func (s *procSet) add(p *peerProc) {
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
}

func (s *procSet) list() []*peerProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs)
}

// exited says why the first of the processes that ended did, or "".
func (s *procSet) exited() string {
	for _, p := range s.list() {
		if why := p.exited(); why != "" {
			return why
		}
	}
	return ""
}

// usage sums the processes' CPU and RSS (see groupUsage).
func (s *procSet) usage() (time.Duration, int64) {
	var pgids []int
	for _, p := range s.list() {
		pgids = append(pgids, p.cmd.Process.Pid)
	}
	return groupUsage(pgids)
}

// peerSystem is one scheduler under test, started fresh for each round.
type peerSystem interface {
	Name() string
	// Start runs the system with one HTTP task per id, every second, on
	// target + "/t/" + id; it adds every process it starts to procs.
	Start(ctx context.Context, dir, target string, ids []string, procs *procSet) error
	Stop()
}

// ours is a master process (SQLite) and a worker process.
type ours struct {
	b              *bench
	master, worker *peerProc
}

func (o *ours) Name() string { return "ours" }

func (o *ours) Start(ctx context.Context, dir, target string, ids []string, procs *procSet) error {
	bin, err := o.b.binaryPath(ctx)
	if err != nil {
		return err
	}
	// The tasks are in the database, running, before the worker registers:
	// its registration pushes them.
	const worker = "peerw"
	mdir := filepath.Join(dir, "master")
	dsn, _ := store.ParseDSN("", mdir)
	log, _ := o.b.newLogger()
	st, err := store.Open(ctx, dsn, log)
	if err != nil {
		return err
	}
	var tasks []*store.Task
	for _, id := range ids {
		t, err := taskRow(httpTask(id, "* * * * * *", target), store.TaskRunning, []string{worker})
		if err != nil {
			st.Close()
			return err
		}
		tasks = append(tasks, t)
	}
	err = insertTasks(ctx, st.DB, tasks)
	st.Close()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	o.master, err = startPeerProc("master", dir, bin, "master", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", mdir,
		"--admin-password", benchPassword, "--cluster-key", benchClusterKey)
	if err != nil {
		return err
	}
	procs.add(o.master)
	if err := waitHTTP(ctx, url+"/health", 60*time.Second, o.master); err != nil {
		return err
	}
	o.worker, err = startPeerProc("worker", dir, bin, "worker", "--identity", worker, "--ip", "127.0.0.1", "--port", "0",
		"--master", url, "--cluster-key", benchClusterKey, "--data-dir", filepath.Join(dir, "worker"), "--maxc", fmt.Sprint(len(ids)))
	if err != nil {
		return err
	}
	procs.add(o.worker)
	return nil
}

func (o *ours) Stop() {
	if o.worker != nil {
		o.worker.stop()
	}
	if o.master != nil {
		o.master.stop()
	}
	o.master, o.worker = nil, nil
}

// dkron is one Dkron agent, a single server node, with its jobs created
// through its REST API.
type dkron struct {
	bin   string
	agent *peerProc
}

func (d *dkron) Name() string { return "Dkron" }

func (d *dkron) Start(ctx context.Context, dir, target string, ids []string, procs *procSet) error {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	api := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	var err error
	d.agent, err = startPeerProc("dkron agent", dir, d.bin, "agent", "--server", "--bootstrap-expect=1", "--node-name=smbench",
		fmt.Sprintf("--http-addr=127.0.0.1:%d", ports[0]), fmt.Sprintf("--rpc-port=%d", ports[1]),
		fmt.Sprintf("--bind-addr=127.0.0.1:%d", ports[2]), "--advertise-addr=127.0.0.1",
		"--data-dir="+filepath.Join(dir, "dkron"), "--log-level=warn", "--disable-usage-stats")
	if err != nil {
		return err
	}
	procs.add(d.agent)
	if err := waitHTTP(ctx, api+"/v1/leader", 90*time.Second, d.agent); err != nil {
		return fmt.Errorf("dkron: no leader: %w", err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(time.Duration(60+len(ids)/5) * time.Second)
	for _, id := range ids {
		job := map[string]any{
			"name": id, "schedule": "* * * * * *", "executor": "http", "concurrency": "allow", "retries": 0,
			"executor_config": map[string]string{"method": "GET", "url": target + "/t/" + id, "timeout": "10", "expectCode": "200"},
		}
		body, _ := json.Marshal(job)
		for {
			if why := d.agent.exited(); why != "" {
				return errors.New(why)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/jobs", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err == nil {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(msg))
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("dkron: create job %s: %v", id, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

func (d *dkron) Stop() {
	if d.agent != nil {
		d.agent.stop()
	}
	d.agent = nil
}

// ---------------------------------------------------------------- rounds

// peerRound is one system's measurement in one round.
type peerRound struct {
	lags            []time.Duration
	fires           int // expected: tasks × seconds
	arrived         int // arrivals attributed to the window's seconds
	missed, doubled int
	cpu             time.Duration
	peakRSS         int64  // during the window
	maxRSS          int64  // at any time of the round (a failure's)
	failed          string // the system died or stopped answering: why
}

// measurePeer starts sys fresh with n tasks, waits until every task has
// fired, measures a window of d and stops it. A system that dies, or does not
// start its tasks or answer its API in time, failed the round (reported, not
// an error of smbench).
func (b *bench) measurePeer(ctx context.Context, t *peerTarget, sys peerSystem, round string, n int, d time.Duration) (peerRound, error) {
	var r peerRound
	dir, err := os.MkdirTemp(b.tmp, "peer-"+round+"-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	arr := t.round(round)
	defer t.drop(round)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("smb-%s-%04d", round, i)
	}
	procs := &procSet{}
	defer sys.Stop()
	// RSS is sampled from the first process on, so that a failure's is known.
	var rssMu sync.Mutex
	var maxRSS, peakRSS int64
	inWindow := false
	sampleRSS := func() time.Duration {
		cpu, rss := procs.usage()
		rssMu.Lock()
		maxRSS = max(maxRSS, rss)
		if inWindow {
			peakRSS = max(peakRSS, rss)
		}
		rssMu.Unlock()
		return cpu
	}
	// result is r with the RSS sampled so far.
	result := func() peerRound {
		rssMu.Lock()
		defer rssMu.Unlock()
		r.maxRSS, r.peakRSS = maxRSS, peakRSS
		return r
	}
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampler:
				return
			case <-tick.C:
				sampleRSS()
			}
		}
	}()
	defer func() {
		close(stopSampler)
		<-samplerDone
	}()
	fail := func(why string) (peerRound, error) {
		if died := procs.exited(); died != "" {
			why = "crashed: " + died
		}
		r.failed = why
		return result(), nil
	}
	if err := sys.Start(ctx, dir, t.url+"/"+round, ids, procs); err != nil {
		if ctx.Err() != nil {
			return result(), ctx.Err()
		}
		return fail("failed to start: " + err.Error())
	}
	// until waits for t; it stops early when the system dies.
	until := func(t time.Time) (string, error) {
		for {
			if why := procs.exited(); why != "" {
				return "crashed: " + why, nil
			}
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			left := time.Until(t)
			if left <= 0 {
				return "", nil
			}
			time.Sleep(min(left, 100*time.Millisecond))
		}
	}
	// Warm-up: every task has fired once, then a few seconds more.
	warm := time.Now().Add(time.Duration(60+n/10) * time.Second)
	for arr.distinct() < n {
		if why := procs.exited(); why != "" {
			return fail(why)
		}
		if ctx.Err() != nil {
			return result(), ctx.Err()
		}
		if time.Now().After(warm) {
			return fail(fmt.Sprintf("%d of %d tasks fired after the warm-up", arr.distinct(), n))
		}
		time.Sleep(200 * time.Millisecond)
	}
	from := time.Now().Truncate(time.Second).Add(3 * time.Second)
	secs := int(d / time.Second)
	end := from.Add(time.Duration(secs) * time.Second)
	for _, step := range []struct {
		at     time.Time
		window bool
	}{{from, true}, {end, false}, {end.Add(3 * time.Second), false}} { // then the late arrivals
		why, err := until(step.at)
		if err != nil {
			return result(), err
		}
		if why != "" {
			return fail(why)
		}
		cpu := sampleRSS()
		rssMu.Lock()
		switch {
		case step.window:
			inWindow = true
			r.cpu = -cpu
		case inWindow:
			inWindow = false
			r.cpu += cpu
		}
		rssMu.Unlock()
	}
	arr.mu.Lock()
	for _, id := range ids {
		lags, missed, doubled := attribute(arr.byTask[id], from, secs)
		r.lags = append(r.lags, lags...)
		r.missed += missed
		r.doubled += doubled
	}
	arr.mu.Unlock()
	r.fires = n * secs
	r.arrived = len(r.lags) + r.doubled
	return result(), nil
}

// peerSummary is a system's figures for one N over its rounds.
type peerSummary struct {
	rounds, failures                int
	failure                         string
	p50, p99                        time.Duration
	fires, missed, doubled, arrived int
	cpuPer1000                      float64 // CPU seconds per 1,000 runs
	peakRSS                         int64
	failRSS                         int64 // the highest RSS seen in a round that failed
}

func summarise(rs []peerRound) peerSummary {
	var s peerSummary
	var p50s, p99s []time.Duration
	var cpus, rsss []float64
	for _, r := range rs {
		s.rounds++
		if r.failed != "" {
			s.failures++
			s.failure = r.failed
			s.failRSS = max(s.failRSS, r.maxRSS)
			continue
		}
		lags := sortDurations(r.lags)
		if len(lags) > 0 {
			p50s, p99s = append(p50s, percentile(lags, 0.50)), append(p99s, percentile(lags, 0.99))
		}
		s.fires, s.missed, s.doubled, s.arrived = s.fires+r.fires, s.missed+r.missed, s.doubled+r.doubled, s.arrived+r.arrived
		if r.arrived > 0 {
			cpus = append(cpus, r.cpu.Seconds()/(float64(r.arrived)/1000))
		}
		rsss = append(rsss, float64(r.peakRSS))
	}
	if len(p50s) > 0 {
		s.p50, s.p99 = medianDur(p50s), medianDur(p99s)
	}
	if len(cpus) > 0 {
		s.cpuPer1000 = medianF(cpus)
	}
	if len(rsss) > 0 {
		s.peakRSS = int64(medianF(rsss))
	}
	return s
}

func (s peerSummary) ok() bool { return s.rounds > s.failures && s.fires > 0 }

// ratio formats ours / theirs, or "—" when either is missing.
func ratio(ours, theirs float64, okOurs, okTheirs bool) string {
	if !okOurs || !okTheirs || theirs == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", ours/theirs)
}

func (b *bench) dkronScenario(ctx context.Context) []row {
	list, d := b.opt.PeerN, b.opt.PeerFor
	if list == "" {
		list = "100,200,500"
	}
	if d < time.Second {
		d = 30 * time.Second
	}
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return []row{errRow("dkron", fmt.Errorf("-peer-n: %q is not a number of tasks", f))}
		}
		ns = append(ns, n)
	}
	bin, err := exec.LookPath(b.opt.PeerDkron)
	if err != nil {
		return []row{errRow("dkron", fmt.Errorf("-peer-dkron: %w", err))}
	}
	if out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput(); err == nil {
		b.logf("%s version: %s", bin, strings.Join(strings.Fields(string(out)), " "))
	}
	if _, err := b.binaryPath(ctx); err != nil {
		return []row{errRow("dkron", err)}
	}
	raiseNoFile()
	t, err := startPeerTarget()
	if err != nil {
		return []row{errRow("dkron", err)}
	}
	defer t.Close()
	var rows []row
	seq := 0
	for _, n := range ns {
		systems := []peerSystem{&ours{b: b}, &dkron{bin: bin}}
		results := map[string][]peerRound{}
		for round := 0; round < b.opt.Runs && ctx.Err() == nil; round++ {
			order := systems
			if round%2 == 1 { // alternate which system goes first
				order = []peerSystem{systems[1], systems[0]}
			}
			for _, sys := range order {
				seq++
				r, err := b.measurePeer(ctx, t, sys, fmt.Sprintf("r%d", seq), n, d)
				if err != nil {
					rows = append(rows, errRow(fmt.Sprintf("%d HTTP tasks every second: %s, round %d", n, sys.Name(), round+1), err))
					continue
				}
				if r.failed != "" {
					b.logf("N=%d round %d %s: FAILED (RSS up to %s): %s", n, round+1, sys.Name(), fmtMB(r.maxRSS), r.failed)
				} else {
					l := sortDurations(r.lags)
					b.logf("N=%d round %d %s: lag p50 %s p99 %s, missed %d, doubled %d of %d, CPU %.2fs for %d runs, peak RSS %s",
						n, round+1, sys.Name(), fmtDur(percentile(l, 0.5)), fmtDur(percentile(l, 0.99)), r.missed, r.doubled, r.fires,
						r.cpu.Seconds(), r.arrived, fmtMB(r.peakRSS))
				}
				results[sys.Name()] = append(results[sys.Name()], r)
			}
		}
		o, k := summarise(results["ours"]), summarise(results["Dkron"])
		rows = append(rows, peerRows(n, d, o, k)...)
	}
	return rows
}

// peerRows prints one N: ours · Dkron · ratio (ours / Dkron).
func peerRows(n int, d time.Duration, o, k peerSummary) []row {
	pre := fmt.Sprintf("%s HTTP tasks every second, one node (%d rounds × %s)", fmtInt(n), max(o.rounds, k.rounds), d)
	side := func(s peerSummary, f func(peerSummary) string) string {
		switch {
		case s.rounds == 0:
			return "not measured"
		case !s.ok():
			return fmt.Sprintf("failed %d of %d times", s.failures, s.rounds)
		case s.failures > 0:
			return f(s) + fmt.Sprintf(" (failed %d of %d times)", s.failures, s.rounds)
		}
		return f(s)
	}
	lag := func(s peerSummary) string { return fmt.Sprintf("%s / %s", fmtDur(s.p50), fmtDur(s.p99)) }
	fires := func(s peerSummary) string {
		return fmt.Sprintf("%s / %s of %s", fmtInt(s.missed), fmtInt(s.doubled), fmtInt(s.fires))
	}
	cpu := func(s peerSummary) string { return fmt.Sprintf("%.2f", s.cpuPer1000) }
	rss := func(s peerSummary) string { return fmtMB(s.peakRSS) }
	rows := []row{
		{pre + ": arrival lag p50 / p99", fmt.Sprintf("ours %s · Dkron %s · ratio p99 %s", side(o, lag), side(k, lag),
			ratio(float64(o.p99), float64(k.p99), o.ok(), k.ok())), "reference", Info},
		// The target knows arrivals only: a fire over 800 ms late whose
		// second has its own arrival, behind one a second late already,
		// counts as a miss and a double.
		{pre + ": missed / doubled fires (one > 0.8 s late may count as both)", fmt.Sprintf("ours %s · Dkron %s", side(o, fires), side(k, fires)), "0 / 0", Info},
		{pre + ": CPU seconds per 1,000 runs, all processes", fmt.Sprintf("ours %s · Dkron %s · ratio %s", side(o, cpu), side(k, cpu),
			ratio(o.cpuPer1000, k.cpuPer1000, o.ok(), k.ok())), "reference", Info},
		{pre + ": peak RSS, all processes", fmt.Sprintf("ours %s · Dkron %s · ratio %s", side(o, rss), side(k, rss),
			ratio(float64(o.peakRSS), float64(k.peakRSS), o.ok(), k.ok())), "reference", Info},
	}
	for _, s := range []struct {
		name string
		sum  peerSummary
	}{{"ours", o}, {"Dkron", k}} {
		if s.sum.failures > 0 {
			rows = append(rows, row{fmt.Sprintf("%s: %s failed", pre, s.name),
				fmt.Sprintf("%d of %d times (RSS up to %s); last: %.240s", s.sum.failures, s.sum.rounds, fmtMB(s.sum.failRSS), s.sum.failure), "no failure", Info})
		}
	}
	return rows
}
