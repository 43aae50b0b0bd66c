package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// bulkBatch is how many tasks one bulk request of the scenario carries
// (master.MaxBulkTasks).
const bulkBatch = 10_000

// schedulingStarted is the line a worker logs when a push of its whole
// schedule ends (one body, or the last part).
var schedulingStarted = regexp.MustCompile(`msg="scheduling started"`)

// bulkLine matches what a master logs about a chunk of a bulk action.
var bulkLine = regexp.MustCompile(`msg="bulk task action" action=start`)

// workerEnv is the environment the scenario's workers run with.
var workerEnv = []string{"GOMEMLIMIT=off"}

// workerRegLine matches what a worker logs about its registration.
var workerRegLine = regexp.MustCompile(`registered with the master|tasks fetched|takes no registration in parts`)

// pushLine matches what a restarted master logs about its pushes.
var pushLine = regexp.MustCompile(`master serving|tasks pushed|re-pushed|elected|leader`)

// bulkScenario is issue 28's bulk work and restart at scale, on real
// processes: a master over SQLite and three workers. N HTTP tasks are
// created through POST /api/v1/tasks/bulk (10,000 per call) and started
// through the same route; delayed tasks are created through POST
// /api/v1/delayed/batch; then the master is restarted and the time until
// every worker has had its whole schedule pushed again is measured, with
// the master's memory; then one worker is restarted and the time until it
// has its whole schedule again is measured, with the master's memory.
// -restart-bin runs the restarted master from another binary (an earlier
// version, for a before/after figure); -bin runs every process from it.
func (b *bench) bulkScenario(ctx context.Context) []row {
	rows := b.bulkOn(ctx, "SQLite", nil)
	srv := b.serverOf("mysql")
	if srv.dsns == nil {
		return append(rows, row{"bulk, MariaDB", "skipped: " + srv.missing, "-", Info})
	}
	dsns, drop, err := srv.create(ctx)
	if err != nil {
		return append(rows, errRow("bulk, MariaDB", err))
	}
	defer drop()
	return append(rows, b.bulkOn(ctx, "MariaDB", []string{"--db", dsns[0]})...)
}

// bulkOn is the bulk scenario with the master's database given by dbArgs
// (none: SQLite in its data directory); label names the database.
func (b *bench) bulkOn(ctx context.Context, label string, dbArgs []string) []row {
	n := b.pick(100_000, 3_000)
	if b.opt.BulkN > 0 {
		n = b.opt.BulkN
	}
	delayed := b.pick(50_000, 2_000)
	name := fmt.Sprintf("bulk: %s HTTP tasks created through POST /api/v1/tasks/bulk (%s per call), 3 worker processes, %s", fmtInt(n), fmtInt(bulkBatch), label)
	bin, err := b.binaryPath(ctx)
	if err != nil {
		return []row{errRow(name, err)}
	}
	target := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusNoContent) }))
	defer target.Close()
	dir := filepath.Join(b.tmp, "bulk-"+label)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return []row{errRow(name, err)}
	}
	// A fixed address: the workers know the master by it across its restart.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return []row{errRow(name, err)}
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	masterArgs := []string{"master", "--listen", addr, "--data-dir", filepath.Join(dir, "master"),
		"--admin-password", benchPassword, "--cluster-key", benchClusterKey, "--health-interval", "2s", "--health-timeout", "1s"}
	masterArgs = append(masterArgs, dbArgs...)
	mp, _, err := startProc(ctx, bin, masterServing, masterArgs...)
	if err != nil {
		return []row{errRow(name, err)}
	}
	defer func() { mp.stop() }()
	var workers []*proc
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	workerArgs := func(i int) []string {
		return []string{"worker", "--identity", fmt.Sprint("bulk", i), "--ip", "127.0.0.1", "--port", "0", "--master", base,
			"--cluster-key", benchClusterKey, "--data-dir", filepath.Join(dir, fmt.Sprint("w", i)), "--maxc", "100"}
	}
	for i := range 3 {
		w, _, err := startProcEnv(ctx, bin, workerEnv, workerServing, workerArgs(i)...)
		if err != nil {
			return []row{errRow(name, err)}
		}
		workers = append(workers, w)
	}
	cookie, err := login(base, "admin", benchPassword)
	if err != nil {
		return []row{errRow(name, err)}
	}
	api := &bulkAPI{base: base, cookie: cookie, client: &http.Client{Timeout: 10 * time.Minute}}
	hosts, err := api.waitWorkers(ctx, 3, 60*time.Second)
	if err != nil {
		return []row{errRow(name, err)}
	}

	// Create.
	var ids []string
	t0 := time.Now()
	for lo := 0; lo < n; lo += bulkBatch {
		tasks := make([]map[string]any, 0, bulkBatch)
		for i := lo; i < min(lo+bulkBatch, n); i++ {
			tasks = append(tasks, map[string]any{
				"title": fmt.Sprint("bulk ", i), "type": "http", "schedule": map[string]any{"kind": "interval", "every": "1h"},
				"http": map[string]any{"method": "GET", "url": target.URL}, "executors": []string{fmt.Sprint("bulk", i%3)},
			})
		}
		var out struct {
			Results []struct {
				ID    string `json:"id"`
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			} `json:"results"`
		}
		t1 := time.Now()
		if err := api.post(ctx, "/api/v1/tasks/bulk", map[string]any{"tasks": tasks}, &out); err != nil {
			return []row{errRow(name, err)}
		}
		b.logf("bulk: create call %d took %s", lo/bulkBatch, time.Since(t1))
		for _, r := range out.Results {
			if !r.OK {
				return []row{errRow(name, fmt.Errorf("bulk create refused a task: %s", r.Error))}
			}
			ids = append(ids, r.ID)
		}
	}
	created := time.Since(t0)

	// Start.
	t0 = time.Now()
	for lo := 0; lo < len(ids); lo += bulkBatch {
		var out struct {
			Results []struct {
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			} `json:"results"`
		}
		t1 := time.Now()
		if err := api.post(ctx, "/api/v1/tasks/bulk", map[string]any{"action": "start", "ids": ids[lo:min(lo+bulkBatch, len(ids))]}, &out); err != nil {
			return []row{errRow(name, err)}
		}
		b.logf("bulk: start call %d took %s", lo/bulkBatch, time.Since(t1))
		for _, r := range out.Results {
			if !r.OK {
				return []row{errRow(name, fmt.Errorf("bulk start failed for a task: %s", r.Error))}
			}
		}
	}
	started := time.Since(t0)
	scheduled, err := scheduledOn(ctx, hosts)
	if err != nil || scheduled != n {
		return []row{errRow(name, fmt.Errorf("the workers schedule %d tasks, want %d (%v)", scheduled, n, err))}
	}
	b.logf("bulk: created %d tasks in %s, started in %s", n, created, started)
	rows := []row{
		{name, fmt.Sprintf("%s tasks/s created (%s)", fmtInt(int(float64(n)/created.Seconds())), fmtDur(created)), "-", Info},
		{fmt.Sprintf("  bulk: %s tasks started through POST /api/v1/tasks/bulk {\"action\":\"start\"}", fmtInt(n)), fmtDur(started),
			"<= 30 s", verdict(started <= 30*time.Second)},
	}

	// Delayed tasks, in batches.
	dname := fmt.Sprintf("  bulk: %s delayed tasks created through POST /api/v1/delayed/batch (%s per call)", fmtInt(delayed), fmtInt(bulkBatch))
	t0 = time.Now()
	for lo := 0; lo < delayed; lo += bulkBatch {
		tasks := make([]map[string]any, 0, bulkBatch)
		for i := lo; i < min(lo+bulkBatch, delayed); i++ {
			tasks = append(tasks, map[string]any{"source_app": "smbench", "topic": "bulk", "content_key": strconv.Itoa(i),
				"delay": "1h", "notify_url": target.URL})
		}
		var out struct {
			Results []struct {
				Created bool   `json:"created"`
				Error   string `json:"error"`
			} `json:"results"`
		}
		t1 := time.Now()
		if err := api.post(ctx, "/api/v1/delayed/batch", map[string]any{"tasks": tasks}, &out); err != nil {
			return append(rows, errRow(dname, err))
		}
		b.logf("bulk: delayed batch call %d took %s", lo/bulkBatch, time.Since(t1))
		for _, r := range out.Results {
			if !r.Created {
				return append(rows, errRow(dname, fmt.Errorf("a delayed task was not created: %s", r.Error)))
			}
		}
	}
	took := time.Since(t0)
	rate := float64(delayed) / took.Seconds()
	rows = append(rows, row{dname, fmt.Sprintf("%s/s (%s)", fmtInt(int(rate)), fmtDur(took)), ">= 5,000/s", verdict(rate >= 5000)})

	// Restart: every worker gets its whole schedule again.
	rname := fmt.Sprintf("  restart: master restarted with %s running tasks on 3 workers, until each has its schedule pushed again", fmtInt(n))
	restartBin := bin
	if b.opt.RestartBin != "" {
		restartBin = b.opt.RestartBin
		rname += " (restarted master: " + filepath.Base(restartBin) + ")"
	}
	mp.mu.Lock()
	shown := 0
	for _, l := range mp.logs {
		if bulkLine.MatchString(l) && shown < 12 {
			b.logf("bulk: master: %s", l)
			shown++
		}
	}
	mp.mu.Unlock()
	mp.stop()
	var seen []<-chan time.Time
	for _, w := range workers {
		seen = append(seen, w.watch(schedulingStarted))
	}
	t0 = time.Now()
	mp, _, err = startProc(ctx, restartBin, masterServing, masterArgs...)
	if err != nil {
		return append(rows, errRow(rname, err))
	}
	peak := int64(0)
	var last time.Time
	deadline := time.After(5 * time.Minute)
	for _, ch := range seen {
	wait:
		for {
			select {
			case at := <-ch:
				if at.After(last) {
					last = at
				}
				break wait
			case <-time.After(100 * time.Millisecond):
				if rss, _, err := procStatus(mp.cmd.Process.Pid); err == nil {
					peak = max(peak, rss)
				}
			case <-deadline:
				return append(rows, errRow(rname, fmt.Errorf("a worker had no push within 5 minutes of the restart")))
			case <-ctx.Done():
				return append(rows, errRow(rname, ctx.Err()))
			}
		}
	}
	repush := last.Sub(t0)
	_, hwm, _ := procStatus(mp.cmd.Process.Pid)
	if scheduled, err := scheduledOn(ctx, hosts); err != nil || scheduled != n {
		return append(rows, errRow(rname, fmt.Errorf("after the restart the workers schedule %d tasks, want %d (%v)", scheduled, n, err)))
	}
	b.logf("bulk: restart re-push %s, master RSS peak %s, VmHWM %s", repush, fmtMB(peak), fmtMB(hwm))
	rows = append(rows,
		row{rname, fmt.Sprintf("%s from the process start", fmtDur(repush)), "-", Info},
		row{"  restart: master RSS while it pushes (sampled peak; VmHWM)", fmt.Sprintf("%s; %s", fmtMB(peak), fmtMB(hwm)),
			"< 100 MB", verdict(hwm < 100<<20)},
	)

	// A worker restarts (SIGTERM, same data dir): it registers again and
	// gets its whole schedule back from the master.
	mine := (n + 2) / 3 // bulk0 executes tasks 0, 3, 6, …
	wname := fmt.Sprintf("  worker restart: a worker with %s tasks restarted (SIGTERM, same data dir), until it has them all again", fmtInt(mine))
	if b.opt.Bin != "" {
		wname += " (" + filepath.Base(bin) + ")"
	}
	base0, _, _ := procStatus(mp.cmd.Process.Pid) // the master's RSS before
	workers[0].stop()
	// The master's peak RSS from here on (Linux: 5 resets VmHWM).
	hwmSince := "since the worker's restart"
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", mp.cmd.Process.Pid), []byte("5"), 0); err != nil {
		hwmSince = "since the master's start"
	}
	t0 = time.Now()
	w0, _, back, err := startProcWatch(ctx, bin, workerEnv, workerServing, schedulingStarted, workerArgs(0)...)
	if err != nil {
		return append(rows, errRow(wname, err))
	}
	workers[0] = w0
	peak = 0
	var at time.Time
	deadline = time.After(5 * time.Minute)
waitBack:
	for {
		select {
		case at = <-back:
			break waitBack
		case <-time.After(100 * time.Millisecond):
			if rss, _, err := procStatus(mp.cmd.Process.Pid); err == nil {
				peak = max(peak, rss)
			}
		case <-deadline:
			return append(rows, errRow(wname, fmt.Errorf("the restarted worker did not have its tasks within 5 minutes")))
		case <-ctx.Done():
			return append(rows, errRow(wname, ctx.Err()))
		}
	}
	back0 := at.Sub(t0)
	_, hwm, _ = procStatus(mp.cmd.Process.Pid)
	if hosts, err = api.waitWorkers(ctx, 3, 60*time.Second); err != nil {
		return append(rows, errRow(wname, err))
	}
	if scheduled, err := scheduledOn(ctx, hosts); err != nil || scheduled != n {
		return append(rows, errRow(wname, fmt.Errorf("after the worker's restart the workers schedule %d tasks, want %d (%v)", scheduled, n, err)))
	}
	b.logf("bulk: worker restart %s, master RSS peak %s, VmHWM %s (%s), RSS before %s", back0, fmtMB(peak), fmtMB(hwm), hwmSince, fmtMB(base0))
	w0.mu.Lock()
	for _, l := range w0.logs {
		if workerRegLine.MatchString(l) {
			b.logf("bulk: restarted worker: %s", l)
		}
	}
	w0.mu.Unlock()
	rows = append(rows,
		row{wname, fmt.Sprintf("%s from the process start", fmtDur(back0)), "-", Info},
		row{"  worker restart: master RSS meanwhile (sampled peak; VmHWM " + hwmSince + "; RSS before)",
			fmt.Sprintf("%s; %s; %s", fmtMB(peak), fmtMB(hwm), fmtMB(base0)), "< 100 MB", verdict(hwm < 100<<20)},
	)

	// Then a bulk stop of one call's worth.
	stopN := min(bulkBatch, len(ids))
	var stopOut struct {
		Results []struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"results"`
	}
	t0 = time.Now()
	stopErr := api.post(ctx, "/api/v1/tasks/bulk", map[string]any{"action": "stop", "ids": ids[:stopN]}, &stopOut)
	stopped := time.Since(t0)
	for _, r := range stopOut.Results {
		if !r.OK && stopErr == nil {
			stopErr = fmt.Errorf("bulk stop failed for a task: %s", r.Error)
		}
	}
	mp.mu.Lock()
	for _, l := range mp.logs {
		if pushLine.MatchString(l) {
			b.logf("bulk: restarted master: %s", l)
		}
	}
	mp.mu.Unlock()
	sname := fmt.Sprintf("  bulk: %s tasks stopped in one POST /api/v1/tasks/bulk {\"action\":\"stop\"}", fmtInt(stopN))
	if stopErr != nil {
		return append(rows, errRow(sname, stopErr))
	}
	return append(rows, row{sname, fmtDur(stopped), "-", Info})
}

// bulkAPI calls a master's open API with a session.
type bulkAPI struct {
	base, cookie string
	client       *http.Client
}

// post sends in as JSON and decodes the 200 answer into out.
func (a *bulkAPI) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", a.cookie)
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %.300s", path, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

// waitWorkers waits until want workers run and returns their addresses.
func (a *bulkAPI) waitWorkers(ctx context.Context, want int, timeout time.Duration) ([]string, error) {
	end := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/api/v1/nodes", nil)
		req.Header.Set("Cookie", a.cookie)
		resp, err := a.client.Do(req)
		if err != nil {
			return nil, err
		}
		var nodes []struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Host   string `json:"host"`
		}
		err = json.NewDecoder(resp.Body).Decode(&nodes)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var hosts []string
		for _, n := range nodes {
			if n.Type == store.TypeWorker && n.Status == int(store.StatusRunning) {
				hosts = append(hosts, n.Host)
			}
		}
		if len(hosts) >= want {
			return hosts, nil
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("%d of %d workers running after %s", len(hosts), want, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scheduledOn sums the tasks the workers at hosts schedule (their /health).
func scheduledOn(ctx context.Context, hosts []string) (int, error) {
	total := 0
	for _, h := range hosts {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		var hr struct {
			RunningTasks int `json:"running_tasks"`
		}
		err = json.NewDecoder(resp.Body).Decode(&hr)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		total += hr.RunningTasks
	}
	return total, nil
}
