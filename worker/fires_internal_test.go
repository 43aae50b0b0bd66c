package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestMissedFiresCountsTheScheduleBetweenTwoTimes(t *testing.T) {
	t.Parallel()
	every := func(d time.Duration) protocol.TaskDef {
		return protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(d)}}
	}
	from, to := at("2026-01-02T10:00:00Z"), at("2026-01-02T10:00:05.5Z")
	start, end := at("2026-01-02T10:00:02.5Z"), at("2026-01-02T10:00:04Z")
	withStart, withEnd := every(time.Second), every(time.Second)
	withStart.StartAt, withEnd.EndAt = &start, &end
	berlin := protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "30 2 * * *"}, Timezone: "Europe/Berlin"}
	for _, c := range []struct {
		name        string
		def         protocol.TaskDef
		after, to   time.Time
		n           int
		first, last string
		more        bool
	}{
		// Strictly after the last fire handled, strictly before the restart.
		{"interval", every(time.Second), from, to, 5, "2026-01-02T10:00:01Z", "2026-01-02T10:00:05Z", false},
		{"restart exactly on a fire", every(time.Second), from, at("2026-01-02T10:00:05Z"), 4, "2026-01-02T10:00:01Z", "2026-01-02T10:00:04Z", false},
		{"nothing missed", every(time.Second), from, at("2026-01-02T10:00:00.9Z"), 0, "", "", false},
		{"start_at", withStart, from, to, 3, "2026-01-02T10:00:03Z", "2026-01-02T10:00:05Z", false},
		{"end_at fires", withEnd, from, to, 4, "2026-01-02T10:00:01Z", "2026-01-02T10:00:04Z", false},
		{"bounded", every(time.Second), from, from.AddDate(1, 0, 0), maxMissedCount, "2026-01-02T10:00:01Z", "2026-01-03T13:46:40Z", true},
		// The worker's own cron schedule, in the task's zone, across a
		// spring-forward: 02:30 does not exist on 2026-03-29 and fires at 03:00.
		{"cron with DST", berlin, at("2026-03-27T12:00:00Z"), at("2026-03-30T12:00:00Z"), 3, "2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan, err := protocol.NewPlan(&c.def)
			if err != nil {
				t.Fatal(err)
			}
			// As countMissed asks: strictly before the restart.
			fc := plan.Fires(c.after, c.to.Add(-time.Nanosecond), maxMissedCount)
			n, first, last, more := fc.N, fc.First, fc.Last, fc.More
			if n != c.n || more != c.more {
				t.Fatalf("%d fires (more %v), want %d (more %v)", n, more, c.n, c.more)
			}
			if n > 0 && (first.Format(time.RFC3339) != c.first || last.Format(time.RFC3339) != c.last) {
				t.Fatalf("fires %s … %s, want %s … %s", first.Format(time.RFC3339), last.Format(time.RFC3339), c.first, c.last)
			}
		})
	}
}

// The last fires are written to fires.json and read by the next process; a
// task stopped on purpose is forgotten; a corrupt file is ignored.
func TestLastFiresFileAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newR := func() *fanOutRunner {
		f := newFanOutRunner(t)
		f.fires.load(dir, testutil.Discard())
		return f
	}
	hourly := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}
	r1 := newR()
	for _, id := range []string{"kept", "stopped"} {
		s := httpSpec(id, "http://127.0.0.1:1", hourly)
		s.Paused = true // handled, not run
		if err := r1.start(s); err != nil {
			t.Fatal(err)
		}
	}
	fire := time.Now().Add(time.Hour).Truncate(time.Hour).UTC()
	r1.fireGroupAt(r1.job("kept").group, fire)
	r1.stop("stopped")
	r1.clear(true) // the process stops
	r1.writeFires(true)
	data, err := os.ReadFile(filepath.Join(dir, FiresFile))
	if err != nil {
		t.Fatal(err)
	}
	var file firesFile
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Tasks) != 1 || !file.Tasks["kept"].Equal(fire) {
		t.Fatalf("fires.json holds %v, want only kept at %s", file.Tasks, fire)
	}
	if _, err := os.Stat(filepath.Join(dir, FiresFile+".tmp")); err == nil {
		t.Fatal("temporary file left behind")
	}
	r2 := newR()
	if got, _, _, ok := r2.fires.take("kept"); !ok || !got.Equal(fire) {
		t.Fatalf("next process reads %s %v, want %s", got, ok, fire)
	}
	if err := os.WriteFile(filepath.Join(dir, FiresFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	r3 := newR() // logs and goes on
	if _, _, _, ok := r3.fires.take("kept"); ok {
		t.Fatal("a corrupt file was read")
	}
}

// After a clean stop every fire since the last one saved is missed; after a
// kill, the fires the process may have started without saving them (from
// the next fire it knew of, for two save periods) are not counted: a
// catch-up must not run a fire twice.
func TestMissedFiresAfterACleanStopAndAfterAKill(t *testing.T) {
	t.Parallel()
	last := time.Now().Truncate(time.Second).Add(-10 * time.Second).UTC()
	for _, c := range []struct {
		name  string
		clean bool
		first time.Time
	}{
		{"clean", true, last.Add(time.Second)},
		{"killed", false, last.Add(time.Second + firesUncertain + time.Second)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := firesFile{SavedAt: last.Add(200 * time.Millisecond), Clean: c.clean, NextFire: last.Add(time.Second),
				Tasks: map[string]time.Time{"t": last}}
			if err := writeFileAtomic(filepath.Join(dir, FiresFile), file); err != nil {
				t.Fatal(err)
			}
			if !c.clean {
				// A process that read the file and stopped cleanly without
				// scheduling the task passes the bound on.
				between := newFanOutRunner(t)
				between.fires.load(dir, testutil.Discard())
				between.writeFires(true)
			}
			f := newFanOutRunner(t)
			f.fires.load(dir, testutil.Discard())
			if err := f.start(httpSpec("t", "http://127.0.0.1:1", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)})); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the misfire record", func() bool { return len(misfireRuns(f.sink.all())) == 1 })
			if rec := misfireRuns(f.sink.all())[0]; !rec.ScheduledAt.Equal(c.first) {
				t.Fatalf("first missed fire %s (%q), want %s", rec.ScheduledAt, rec.Output, c.first)
			}
		})
	}
}

// Tasks of one schedule coming back after a long outage are counted once
// for all (a per-second cron down for a day is 86,400 fires to walk), and
// each gets its own record.
func TestMissedFiresOfManyTasksAfterADayDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	last := time.Now().Truncate(time.Second).Add(-24 * time.Hour).UTC()
	file := firesFile{SavedAt: last, Clean: true, Tasks: map[string]time.Time{}}
	var specs []protocol.TaskSpec
	for i := range 100 {
		id := fmt.Sprintf("t%03d", i)
		file.Tasks[id] = last
		specs = append(specs, httpSpec(id, "http://127.0.0.1:1", protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * * *"}))
	}
	if err := writeFileAtomic(filepath.Join(dir, FiresFile), file); err != nil {
		t.Fatal(err)
	}
	f := newFanOutRunner(t)
	f.fires.load(dir, testutil.Discard())
	if err := f.replace(specs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "100 misfire records", func() bool { return len(misfireRuns(f.sink.all())) == 100 })
	for _, rec := range misfireRuns(f.sink.all()) {
		var n int
		if _, err := fmt.Sscanf(rec.Output, "misfire: this worker was down for %d fires", &n); err != nil || n < 86_399 || n > 86_401 {
			t.Fatalf("record %q: want about 86,400 fires", rec.Output)
		}
	}
	if got, _, _, ok := f.fires.take("t000"); ok {
		t.Fatalf("last fire %s still kept after the task came back", got)
	}
}

// runsMaster is the master's end of in-process workers: it stores run
// reports and wins every claim.
type runsMaster struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []protocol.RunReport
}

func newRunsMaster(t *testing.T) *runsMaster {
	m := &runsMaster{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case protocol.PathMasterRuns:
			var body protocol.RunsRequest
			if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			m.mu.Lock()
			m.got = append(m.got, body.Runs...)
			m.mu.Unlock()
			_ = json.NewEncoder(rw).Encode(protocol.RunsResponse{Accepted: len(body.Runs)})
		case protocol.PathMasterClaim:
			_ = json.NewEncoder(rw).Encode(protocol.ClaimResponse{Won: true, Winner: "w1"})
		default:
			_, _ = rw.Write([]byte("{}"))
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *runsMaster) runs(task string) []protocol.RunReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []protocol.RunReport
	for _, r := range m.got {
		if r.TaskID == task {
			out = append(out, r)
		}
	}
	return out
}

// A worker restarted in-process: the fires due while it was down are
// counted from fires.json when its tasks come back, one skipped run for a
// task under skip, one catch-up run under run_once, nothing for a task
// another executor may have run.
func TestRestartedWorkerAppliesTheMisfirePolicy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	m := newRunsMaster(t)
	dir := t.TempDir()
	cfg := Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 10,
		MasterURL: m.srv.URL, ClusterKey: "restart-test-cluster-key-0123456789", DataDir: dir}
	every := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)}
	skip := httpSpec("skip", target.URL, every)
	catchUp := httpSpec("catchup", target.URL, every)
	catchUp.Misfire = protocol.MisfireRunOnce
	shared := httpSpec("shared", target.URL, every)
	shared.Executors = 2
	tasks := []protocol.TaskSpec{skip, catchUp, shared}
	start := func() *Worker {
		w, err := New(cfg, testutil.Discard())
		if err != nil {
			t.Fatal(err)
		}
		go w.Run(context.Background()) // until Stop
		if err := w.Startup(context.Background(), protocol.StartupRequest{Tasks: tasks}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w1 := start()
	waitFor(t, "a run of each task", func() bool {
		return len(m.runs("skip")) > 0 && len(m.runs("catchup")) > 0 && len(m.runs("shared")) > 0
	})
	if err := w1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := map[string]time.Time{}
	for _, id := range []string{"skip", "catchup", "shared"} {
		for _, r := range m.runs(id) {
			if r.ScheduledAt.After(last[id]) {
				last[id] = r.ScheduledAt
			}
		}
	}
	down := time.Now()
	waitFor(t, "three fires while the worker is down", func() bool { return time.Since(down) > 3200*time.Millisecond })
	restarted := time.Now()
	w2 := start()
	started := time.Now()
	defer w2.Stop(context.Background())
	waitFor(t, "the misfire record and the catch-up run", func() bool {
		return len(misfireRuns(m.runs("skip"))) == 1 && hasRun(m.runs("catchup"), last["catchup"].Add(time.Second))
	})
	rec := misfireRuns(m.runs("skip"))[0]
	first := last["skip"].Add(time.Second)
	// The fires first, first+1s, … before the task was scheduled again,
	// somewhere between restarted and started.
	var n int
	var from, to string
	if _, err := fmt.Sscanf(rec.Output, "misfire: this worker was down for %d fires from %s to %s", &n, &from, &to); err != nil {
		t.Fatalf("misfire record says %q: %v", rec.Output, err)
	}
	lo, hi := int(restarted.Sub(first)/time.Second)+1, int(started.Sub(first)/time.Second)+1
	lastMissed := first.Add(time.Duration(n-1) * time.Second)
	if n < 3 || n < lo || n > hi || from != first.Format(time.RFC3339) || to != lastMissed.Format(time.RFC3339) {
		t.Fatalf("misfire record says %q: want %d to %d fires from %s", rec.Output, lo, hi, first.Format(time.RFC3339))
	}
	if !rec.ScheduledAt.Equal(first) || rec.Result != protocol.ResultSkipped {
		t.Fatalf("misfire record %+v: want it skipped, scheduled at %s", rec, first)
	}
	for _, r := range m.runs("skip") {
		if r.Result == protocol.ResultSuccess && r.ScheduledAt.After(last["skip"]) && r.ScheduledAt.Before(restarted) {
			t.Fatalf("a missed fire of skip ran: %+v", r)
		}
	}
	// run_once: one catch-up run, at the first missed fire, and no record.
	catchUps := 0
	for _, r := range m.runs("catchup") {
		if r.ScheduledAt.After(last["catchup"]) && r.ScheduledAt.Before(restarted.Add(-time.Second)) {
			catchUps++
			if !r.ScheduledAt.Equal(last["catchup"].Add(time.Second)) || r.Result != protocol.ResultSuccess {
				t.Fatalf("catch-up run %+v: want success at the first missed fire", r)
			}
			if r.Covers < 3 || !strings.HasPrefix(r.Output, "catch-up run (misfire policy run_once) for ") {
				t.Fatalf("catch-up run covers %d, output %q: want the missed fires counted and said first", r.Covers, r.Output)
			}
		}
	}
	if catchUps != 1 || len(misfireRuns(m.runs("catchup"))) != 0 {
		t.Fatalf("%d catch-up runs and %d records under run_once, want 1 and 0", catchUps, len(misfireRuns(m.runs("catchup"))))
	}
	// Two executors: another one may have run the missed fires.
	if len(misfireRuns(m.runs("shared"))) != 0 {
		t.Fatal("a multi-executor task got a misfire record after the restart")
	}
	for _, r := range m.runs("shared") {
		if r.ScheduledAt.After(last["shared"]) && r.ScheduledAt.Before(restarted.Add(-time.Second)) {
			t.Fatalf("a missed fire of a multi-executor task ran: %+v", r)
		}
	}
}

func hasRun(runs []protocol.RunReport, fire time.Time) bool {
	for _, r := range runs {
		if r.ScheduledAt.Equal(fire) && r.Result == protocol.ResultSuccess {
			return true
		}
	}
	return false
}

// When the master saw the node down (DownNoticed), the master records what
// its tasks missed: the restarted worker forgets its last fires and records
// nothing, so the outage is not recorded twice.
func TestRestartNoticedByTheMasterRecordsNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	m := newRunsMaster(t)
	dir := t.TempDir()
	cfg := Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 10,
		MasterURL: m.srv.URL, ClusterKey: "restart-test-cluster-key-0123456789", DataDir: dir}
	every := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)}
	skip := httpSpec("skip", target.URL, every)
	catchUp := httpSpec("catchup", target.URL, every)
	catchUp.Misfire = protocol.MisfireRunOnce
	tasks := []protocol.TaskSpec{skip, catchUp}
	start := func(noticed bool) *Worker {
		w, err := New(cfg, testutil.Discard())
		if err != nil {
			t.Fatal(err)
		}
		go w.Run(context.Background()) // until Stop
		if err := w.Startup(context.Background(), protocol.StartupRequest{Tasks: tasks, DownNoticed: noticed}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w1 := start(false)
	waitFor(t, "a run of each task", func() bool { return len(m.runs("skip")) > 0 && len(m.runs("catchup")) > 0 })
	if err := w1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var lastCatchUp time.Time
	for _, r := range m.runs("catchup") {
		if r.ScheduledAt.After(lastCatchUp) {
			lastCatchUp = r.ScheduledAt
		}
	}
	down := time.Now()
	waitFor(t, "three fires while the worker is down", func() bool { return time.Since(down) > 3200*time.Millisecond })
	restarted := time.Now()
	w2 := start(true)
	defer w2.Stop(context.Background())
	// The first scheduled runs after the restart show the tasks are back.
	waitFor(t, "a scheduled run after the restart", func() bool {
		for _, r := range m.runs("skip") {
			if r.ScheduledAt.After(restarted) {
				return true
			}
		}
		return false
	})
	if n := len(misfireRuns(m.runs("skip"))); n != 0 {
		t.Fatalf("%d misfire records after a restart the master noticed, want 0", n)
	}
	if hasRun(m.runs("catchup"), lastCatchUp.Add(time.Second)) {
		t.Fatal("a catch-up run after a restart the master noticed")
	}
}

// When the master saw the node down only later (it was down itself when the
// worker stopped), it hands over at DownSince: the restarted worker records
// the fires its previous process missed before DownSince, the master those
// from it on, so none is lost and none counted twice.
func TestRestartHandedOverCountsTheFiresBeforeDownSince(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	m := newRunsMaster(t)
	cfg := Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 10,
		MasterURL: m.srv.URL, ClusterKey: "restart-test-cluster-key-0123456789", DataDir: t.TempDir()}
	every := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)}
	skip := httpSpec("skip", target.URL, every)
	start := func(req protocol.StartupRequest) *Worker {
		w, err := New(cfg, testutil.Discard())
		if err != nil {
			t.Fatal(err)
		}
		go w.Run(context.Background()) // until Stop
		if err := w.Startup(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w1 := start(protocol.StartupRequest{Tasks: []protocol.TaskSpec{skip}})
	waitFor(t, "a run", func() bool { return len(m.runs("skip")) > 0 })
	if err := w1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for _, r := range m.runs("skip") {
		if r.ScheduledAt.After(last) {
			last = r.ScheduledAt
		}
	}
	down := time.Now()
	waitFor(t, "four fires while the worker is down", func() bool { return time.Since(down) > 4200*time.Millisecond })
	// The master noticed the node down two fires after the worker's last one.
	since := last.Add(2*time.Second + 500*time.Millisecond)
	w2 := start(protocol.StartupRequest{Tasks: []protocol.TaskSpec{skip}, DownNoticed: true, DownSince: &since})
	defer w2.Stop(context.Background())
	waitFor(t, "the misfire record", func() bool { return len(misfireRuns(m.runs("skip"))) == 1 })
	rec := misfireRuns(m.runs("skip"))[0]
	first := last.Add(time.Second)
	want := fmt.Sprintf("misfire: this worker was down for 2 fires from %s to %s", first.Format(time.RFC3339),
		first.Add(time.Second).Format(time.RFC3339))
	if !strings.HasPrefix(rec.Output, want) || !rec.ScheduledAt.Equal(first) {
		t.Fatalf("misfire record %q at %s, want %q at %s", rec.Output, rec.ScheduledAt, want, first)
	}
}

// A catch-up the worker cannot stand behind (no fire, a count past the bound,
// reversed times) is refused with ErrInvalid: its report would be refused
// by the master and the run lost.
func TestRunOnceRefusesABadCatchUp(t *testing.T) {
	t.Parallel()
	w, err := New(Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 1,
		ClusterKey: "restart-test-cluster-key-0123456789"}, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	spec := httpSpec("t1", "http://127.0.0.1:1", protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)})
	err = w.RunOnce(protocol.RunOnceRequest{ID: "t1", Task: &spec, CatchUp: &protocol.CatchUp{Fires: -1}})
	if !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("RunOnce with a negative catch-up: %v, want ErrInvalid", err)
	}
}

// The master's misfire window for a node's task ends when it records the
// node running again (RunningSince); the fires after that and before the
// worker schedules the task (the registration's answer on its way) are the
// worker's to record, once, and only for the tasks of that Startup.
func TestStartupCountsTheFiresAfterRunningSince(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(target.Close)
	m := newRunsMaster(t)
	cfg := Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, Priority: 1, MaxConcurrency: 10,
		MasterURL: m.srv.URL, ClusterKey: "restart-test-cluster-key-0123456789", DataDir: t.TempDir()}
	w, err := New(cfg, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(context.Background()) // until Stop
	defer w.Stop(context.Background())
	every := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)}
	gap := httpSpec("gap", target.URL, every)
	// The master recorded the node running half a second after a fire, three
	// fires ago (the last one this very second, before the Startup).
	up := time.Now().Truncate(time.Second).Add(-2500 * time.Millisecond)
	down := up.Add(-time.Minute)
	before := time.Now()
	if err := w.Startup(context.Background(), protocol.StartupRequest{Tasks: []protocol.TaskSpec{gap}, DownNoticed: true,
		DownSince: &down, RunningSince: &up}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	waitFor(t, "the misfire record", func() bool { return len(misfireRuns(m.runs("gap"))) == 1 })
	rec := misfireRuns(m.runs("gap"))[0]
	// The whole seconds after up and before the task was scheduled.
	lo, hi := int(before.Sub(up)/time.Second), int(after.Sub(up)/time.Second)+1
	var n int
	if _, err := fmt.Sscanf(rec.Output, "misfire: %d fires from", &n); err != nil || n < lo || n > hi ||
		!strings.Contains(rec.Output, "giving this worker its tasks back") ||
		!rec.ScheduledAt.After(up) || rec.ScheduledAt.After(up.Add(time.Second)) {
		t.Fatalf("misfire record %q at %s, want %d to %d fires from the first after %s", rec.Output, rec.ScheduledAt, lo, hi, up)
	}
	// A task started later is not counted from RunningSince again.
	later := httpSpec("later", target.URL, every)
	if err := w.StartTask(later); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a run of the later task", func() bool { return len(m.runs("later")) > 0 })
	if n := len(misfireRuns(m.runs("later"))); n != 0 {
		t.Fatalf("%d misfire records for a task started after the Startup", n)
	}
}
