package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// proc is a running schedulemaster process with its log kept.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []string
	done chan struct{}
	// watchers are told when a log line matches (see watch).
	watchers []lineWatcher
}

// lineWatcher is one wait for a log line: when one matches re, the time
// it was read goes to ch (once).
type lineWatcher struct {
	re *regexp.Regexp
	ch chan time.Time
}

// watch returns a channel that receives the time the next log line
// matching re is read (the lines kept in logs are bounded; this sees all).
func (p *proc) watch(re *regexp.Regexp) <-chan time.Time {
	ch := make(chan time.Time, 1)
	p.mu.Lock()
	p.watchers = append(p.watchers, lineWatcher{re, ch})
	p.mu.Unlock()
	return ch
}

var (
	workerServing = regexp.MustCompile(`msg="worker serving" listen=\S+ host=(\S+)`)
	masterServing = regexp.MustCompile(`msg="master serving" url=(\S+)`)
)

// binaryPath builds the schedulemaster binary once (or uses -bin).
func (b *bench) binaryPath(ctx context.Context) (string, error) {
	if b.opt.Bin != "" {
		return b.opt.Bin, nil
	}
	if b.binary != "" {
		return b.binary, nil
	}
	out := filepath.Join(b.tmp, "schedulemaster")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/schedulemaster-go/schedulemaster/cmd/schedulemaster")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build schedulemaster (run smbench inside the module, or pass -bin): %v: %s", err, msg)
	}
	b.binary = out
	return out, nil
}

// startProc runs the binary and waits for a log line matching ready.
func startProc(ctx context.Context, bin string, ready *regexp.Regexp, args ...string) (*proc, []string, error) {
	return startProcEnv(ctx, bin, nil, ready, args...)
}

// startProcEnv is startProc with variables added to the environment.
func startProcEnv(ctx context.Context, bin string, env []string, ready *regexp.Regexp, args ...string) (*proc, []string, error) {
	p, m, _, err := startProcWatch(ctx, bin, env, ready, nil, args...)
	return p, m, err
}

// startProcWatch is startProcEnv that also watches for a line matching
// watch (when not nil) from the process start on: the channel gets the
// time the first one is read.
func startProcWatch(ctx context.Context, bin string, env []string, ready, watch *regexp.Regexp, args ...string) (*proc, []string, <-chan time.Time, error) {
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	var seen <-chan time.Time
	if watch != nil {
		seen = p.watch(watch)
	}
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if len(p.logs) < 2000 {
				p.logs = append(p.logs, line)
			}
			if len(p.watchers) > 0 {
				now := time.Now()
				p.watchers = slices.DeleteFunc(p.watchers, func(w lineWatcher) bool {
					if w.re.MatchString(line) {
						w.ch <- now
						return true
					}
					return false
				})
			}
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(line); m != nil && !sent {
				found <- m
				sent = true
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	select {
	case m := <-found:
		return p, m, seen, nil
	case <-p.done:
		return nil, nil, nil, fmt.Errorf("%s exited before it was ready:\n%s", filepath.Base(bin), p.tail())
	case <-time.After(60 * time.Second):
		p.kill()
		return nil, nil, nil, fmt.Errorf("not ready after 60s:\n%s", p.tail())
	case <-ctx.Done():
		p.kill()
		return nil, nil, nil, ctx.Err()
	}
}

func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logs[max(0, len(p.logs)-20):], "\n")
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits (bounded) for a graceful exit.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// rssPeak samples VmRSS every 250 ms for d and returns the last and the highest.
func rssPeak(ctx context.Context, pid int, d time.Duration) (last, peak, hwm int64, err error) {
	end := time.Now().Add(d)
	for {
		rss, h, err := procStatus(pid)
		if err != nil {
			return 0, 0, 0, err
		}
		last, peak, hwm = rss, max(peak, rss), h
		if time.Now().After(end) || ctx.Err() != nil {
			return last, peak, hwm, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (b *bench) rssScenario(ctx context.Context) []row {
	rows := b.workerRSS(ctx)
	return append(rows, b.masterRSS(ctx)...)
}

// workerRSS runs a real worker process registered with an in-process master:
// idle, then with 1,000 tasks on a per-minute schedule, then with 1,000 HTTP
// tasks firing every second. The worker runs with GOMEMLIMIT=off: it would
// otherwise set itself a soft memory limit, which could hide growth.
func (b *bench) workerRSS(ctx context.Context) []row {
	tasks := b.pick(1000, 100)
	idleName := "worker RSS, idle (registered, scheduler running, no task; GOMEMLIMIT=off in every worker row)"
	bin, err := b.binaryPath(ctx)
	if err != nil {
		return []row{errRow(idleName, err)}
	}
	e, err := b.newIngestEnv(ctx, "sqlite")
	if err != nil {
		return []row{errRow(idleName, err)}
	}
	defer e.Close()
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { rw.WriteHeader(http.StatusNoContent) }))
	defer target.Close()

	const name = "rssw"
	p, _, err := startProcEnv(ctx, bin, []string{"GOMEMLIMIT=off"}, workerServing, "worker", "--identity", name, "--ip", "127.0.0.1", "--port", "0",
		"--master", e.srv.URL, "--cluster-key", benchClusterKey, "--data-dir", filepath.Join(b.tmp, "rssw"), "--maxc", fmt.Sprint(tasks))
	if err != nil {
		return []row{errRow(idleName, err)}
	}
	defer p.stop()
	de := &detectEnv{st: e.st}
	node, err := de.waitNode(ctx, name, 30*time.Second, func(n *store.Node) bool { return n.Status == store.StatusRunning })
	if err != nil {
		return []row{errRow(idleName, fmt.Errorf("worker did not register: %w\n%s", err, p.tail()))}
	}
	pid := p.cmd.Process.Pid
	var rows []row

	// Idle.
	time.Sleep(time.Duration(b.pick(5, 1)) * time.Second)
	var idle []int64
	for i := 0; i < b.opt.Runs; i++ {
		rss, _, err := procStatus(pid)
		if err != nil {
			return append(rows, errRow(idleName, err))
		}
		idle = append(idle, rss)
		time.Sleep(500 * time.Millisecond)
	}
	idleRSS := medianI(idle)
	rows = append(rows, row{idleName, fmtMB(idleRSS), "< 25 MB", verdict(idleRSS < 25<<20)})

	// Tasks pushed the way Enable pushes them: POST /api/server/startup.
	client := master.NewClient(30 * time.Second)
	push := func(cron, prefix string) error {
		specs := make([]protocol.TaskSpec, tasks)
		var stored []*store.Task
		for i := range specs {
			def := httpTask(fmt.Sprintf("%s%05d", prefix, i), cron, target.URL)
			specs[i] = protocol.TaskSpec{TaskDef: def, Executors: 1}
			t, err := taskRow(def, store.TaskRunning, []string{name})
			if err != nil {
				return err
			}
			stored = append(stored, t)
		}
		if err := insertTasks(ctx, e.st.DB, stored); err != nil {
			return err
		}
		return client.Startup(ctx, node, specs)
	}

	minuteName := fmt.Sprintf("worker RSS, %s tasks scheduled (cron every minute)", fmtInt(tasks))
	if err := push("0 * * * * *", "min"); err != nil {
		return append(rows, errRow(minuteName, err))
	}
	last, peak, _, err := rssPeak(ctx, pid, time.Duration(b.pick(5, 2))*time.Second)
	if err != nil {
		return append(rows, errRow(minuteName, err))
	}
	rows = append(rows, row{minuteName, fmt.Sprintf("%s (peak %s)", fmtMB(last), fmtMB(peak)), "< 60 MB", verdict(peak < 60<<20)})

	secName := fmt.Sprintf("worker RSS, %s HTTP tasks firing every second", fmtInt(tasks))
	if err := push("* * * * * *", "sec"); err != nil {
		return append(rows, errRow(secName, err))
	}
	d := time.Duration(b.pick(30, 4)) * time.Second
	last, peak, hwm, err := rssPeak(ctx, pid, d)
	if err != nil {
		return append(rows, errRow(secName, err))
	}
	runs, _ := countRuns(ctx, e.st.DB)
	rows = append(rows, row{secName, fmt.Sprintf("%s after %s (peak sampled %s, VmHWM %s; %s runs recorded)", fmtMB(last), d, fmtMB(peak), fmtMB(hwm), fmtInt(runs)),
		"< 60 MB", verdict(peak < 60<<20)})
	return rows
}

func medianI(v []int64) int64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return int64(medianF(f))
}

// masterRSS runs a real master process over a SQLite database holding 1,000
// running nodes, each answering its health probes from an in-process endpoint.
func (b *bench) masterRSS(ctx context.Context) []row {
	n := b.pick(1000, 100)
	name := fmt.Sprintf("master RSS, %s running nodes (probed every 2 s, nodes page served)", fmtInt(n))
	bin, err := b.binaryPath(ctx)
	if err != nil {
		return []row{errRow(name, err)}
	}
	raiseNoFile()
	f, err := startFleet(n, 0, "rss-boot", true)
	if err != nil {
		return []row{errRow(name, err)}
	}
	defer f.Close()
	dir := filepath.Join(b.tmp, "rssmaster")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return []row{errRow(name, err)}
	}
	log, _ := b.newLogger()
	dsn, _ := store.ParseDSN("", dir)
	st, err := store.Open(ctx, dsn, log)
	if err != nil {
		return []row{errRow(name, err)}
	}
	err = insertNodes(ctx, st.DB, f.Nodes)
	st.Close()
	if err != nil {
		return []row{errRow(name, err)}
	}
	p, m, err := startProc(ctx, bin, masterServing, "master", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--admin-password", benchPassword, "--cluster-key", benchClusterKey, "--health-interval", "2s", "--health-timeout", "1s")
	if err != nil {
		return []row{errRow(name, err)}
	}
	defer p.stop()
	url := m[1]
	time.Sleep(time.Duration(b.pick(10, 3)) * time.Second)
	cookie, err := login(url, "admin", benchPassword)
	if err != nil {
		return []row{errRow(name, err)}
	}
	for i := 0; i < 5; i++ {
		for _, path := range []string{"/nodes", "/nodes/rows", "/api/v1/nodes"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
			req.Header.Set("Cookie", cookie)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return []row{errRow(name, err)}
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return []row{errRow(name, fmt.Errorf("GET %s: %d", path, resp.StatusCode))}
			}
		}
	}
	last, peak, hwm, err := rssPeak(ctx, p.cmd.Process.Pid, time.Duration(b.pick(4, 1))*time.Second)
	if err != nil {
		return []row{errRow(name, err)}
	}
	// Every node must still be running: the probes succeeded.
	st2, err := store.Open(ctx, dsn, log)
	if err != nil {
		return []row{errRow(name, err)}
	}
	defer st2.Close()
	off, err := st2.DB.NewSelect().Model((*store.Node)(nil)).Where("status <> ?", store.StatusRunning).Where("type = ?", store.TypeWorker).Count(ctx)
	if err != nil {
		return []row{errRow(name, err)}
	}
	fig := fmt.Sprintf("%s (peak sampled %s, VmHWM %s)", fmtMB(last), fmtMB(peak), fmtMB(hwm))
	if off > 0 {
		fig += fmt.Sprintf("; %d nodes not running!", off)
	}
	return []row{{name, fig, "no target", Info}}
}
