package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// slowTarget is a loopback HTTP target whose requests last until released
// (or hold, when set), failing with 500 while fail > 0. It records how many
// requests were in flight at most, and each request's start and end.
type slowTarget struct {
	srv     *httptest.Server
	release chan struct{} // closed: requests answer at once
	hold    time.Duration // when release is nil: how long each request lasts

	mu       sync.Mutex
	inFlight int
	maxIn    int
	fail     int
	spans    [][2]time.Time
}

func newSlowTarget(t *testing.T) *slowTarget {
	st := &slowTarget{release: make(chan struct{})}
	st.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		st.mu.Lock()
		st.inFlight++
		st.maxIn = max(st.maxIn, st.inFlight)
		release, hold := st.release, st.hold
		st.mu.Unlock()
		start := time.Now()
		if release != nil {
			select {
			case <-release:
			case <-req.Context().Done():
			}
		} else {
			time.Sleep(hold) // the target's own work, not a test waiting
		}
		st.mu.Lock()
		st.inFlight--
		st.spans = append(st.spans, [2]time.Time{start, time.Now()})
		failed := st.fail > 0
		if failed {
			st.fail--
		}
		st.mu.Unlock()
		if failed {
			rw.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(st.srv.Close)
	return st
}

func (st *slowTarget) open() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.release != nil {
		close(st.release)
		st.release = nil // later requests answer at once (hold is 0)
	}
}

func (st *slowTarget) stats() (inFlight, maxIn int, spans [][2]time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.inFlight, st.maxIn, append([][2]time.Time(nil), st.spans...)
}

// reportSink is the master's end of a real reporter: every report it got.
type reportSink struct {
	mu   sync.Mutex
	runs []protocol.RunReport
}

func (s *reportSink) post(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs = append(s.runs, runs...)
	return protocol.RunsResponse{Accepted: len(runs)}, nil
}

func (s *reportSink) all() []protocol.RunReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]protocol.RunReport(nil), s.runs...)
}

// newOverlapRunner is a real runner (gocron scheduler, limiter, reporter)
// with one HTTP task on target under the given policy.
func newOverlapRunner(t *testing.T, target *slowTarget, overlap string, retries int, every time.Duration) (*runner, *reportSink) {
	t.Helper()
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), sink.post)
	go rep.run(ctx)
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100),
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 100 * time.Millisecond,
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return true, nil },
	}
	var err error
	if r.sched, err = newTestScheduler(); err != nil {
		t.Fatal(err)
	}
	r.sched.Start()
	t.Cleanup(func() {
		target.open()
		_ = r.sched.Shutdown()
		cancel()
		<-rep.done
	})
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP, Overlap: overlap, Retries: retries,
		Timeout:  protocol.Duration(20 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(every)},
		HTTP:     &protocol.HTTPSpec{URL: target.srv.URL}}, Executors: 1}
	if err := r.start(spec); err != nil {
		t.Fatal(err)
	}
	return r, sink
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func byResult(runs []protocol.RunReport, result protocol.Result) []protocol.RunReport {
	var out []protocol.RunReport
	for _, r := range runs {
		if r.Result == result {
			out = append(out, r)
		}
	}
	return out
}

func (r *runner) job(id string) *taskJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

// fireMany fires the task n times at once, as gocron would on overlapping
// schedule points, and waits until every fire returned or was admitted.
func fireMany(r *runner, n int) {
	tj := r.job("t1")
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.fire(tj)
		}()
	}
	wg.Wait()
}

func TestOverlapAllowRunsFiresTogether(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	r, sink := newOverlapRunner(t, target, protocol.OverlapAllow, 0, time.Hour)
	go fireMany(r, 3)
	waitFor(t, "three overlapping requests", func() bool { in, _, _ := target.stats(); return in == 3 })
	target.open()
	waitFor(t, "three runs", func() bool { return len(sink.all()) == 3 })
	if ok := byResult(sink.all(), protocol.ResultSuccess); len(ok) != 3 {
		t.Fatalf("runs %+v: want 3 successes", sink.all())
	}
}

func TestOverlapSkipRecordsWhyAndNeverOverlaps(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	r, sink := newOverlapRunner(t, target, protocol.OverlapSkip, 0, time.Hour)
	go r.fire(r.job("t1"))
	waitFor(t, "the first request", func() bool { in, _, _ := target.stats(); return in == 1 })
	// Fifty fires at once while the run goes on: all skipped.
	fireMany(r, 50)
	waitFor(t, "fifty skipped runs", func() bool { return len(sink.all()) == 50 })
	target.open()
	waitFor(t, "the run's report", func() bool { return len(sink.all()) == 51 })
	runs := sink.all()
	ok := byResult(runs, protocol.ResultSuccess)
	if len(ok) != 1 {
		t.Fatalf("runs %+v: want one success", runs)
	}
	want := "skipped: the previous run (id " + ok[0].ID + ") was still running"
	for _, s := range byResult(runs, protocol.ResultSkipped) {
		if s.Output != want || s.TaskID != "t1" || s.Node != "w1" || s.Attempt != 1 {
			t.Fatalf("skipped run %+v: want output %q", s, want)
		}
	}
	if _, maxIn, spans := target.stats(); maxIn != 1 || len(spans) != 1 {
		t.Fatalf("target saw %d requests, %d at once: want 1, 1", len(spans), maxIn)
	}
	// Idle again: fifty fires at once start exactly one run.
	target.mu.Lock()
	target.release = make(chan struct{})
	target.mu.Unlock()
	go fireMany(r, 50) // returns when the one admitted run ends
	waitFor(t, "49 more skipped runs", func() bool { return len(byResult(sink.all(), protocol.ResultSkipped)) == 99 })
	target.open()
	waitFor(t, "the second run", func() bool { return len(byResult(sink.all(), protocol.ResultSuccess)) == 2 })
	if _, maxIn, spans := target.stats(); maxIn != 1 || len(spans) != 2 {
		t.Fatalf("target saw %d requests, %d at once: want 2, 1", len(spans), maxIn)
	}
}

// A run's retries belong to it: fires during its attempts and backoffs are
// skipped, and quote the attempt in progress.
func TestOverlapSkipCoversRetries(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	target.release, target.hold, target.fail = nil, 50*time.Millisecond, 2
	r, sink := newOverlapRunner(t, target, protocol.OverlapSkip, 2, time.Hour)
	go r.fire(r.job("t1"))
	done := func() bool { return len(byResult(sink.all(), protocol.ResultSuccess)) >= 1 }
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %+v", sink.all())
		}
		fireMany(r, 2)
		time.Sleep(10 * time.Millisecond) // pace the fires; the loop ends on a condition, not on time
	}
	// The fires of the last loop turn may have started a new run: let it end.
	waitFor(t, "the target idle", func() bool { in, _, _ := target.stats(); return in == 0 })
	runs := sink.all()
	// The first run is its three attempts, reported in order, before any other.
	ids := map[string]bool{}
	var attempts []int
	var end time.Time
	for _, x := range runs {
		if x.Result != protocol.ResultSkipped && len(attempts) < 3 {
			ids[x.ID] = true
			attempts = append(attempts, x.Attempt)
			end = x.EndedAt
		}
	}
	if len(attempts) != 3 || attempts[0] != 1 || attempts[1] != 2 || attempts[2] != 3 {
		t.Fatalf("attempts %v: want 1, 2, 3 of one run", attempts)
	}
	var during int
	for _, x := range runs {
		switch {
		case ids[x.ID]:
		case x.Result != protocol.ResultSkipped:
			if x.StartedAt.Before(end) {
				t.Fatalf("run %+v started during the retried run", x)
			}
		case x.StartedAt.Before(end):
			during++
			id := strings.TrimSuffix(strings.TrimPrefix(x.Output, "skipped: the previous run (id "), ") was still running")
			if !ids[id] {
				t.Fatalf("skipped run quotes %q, not an attempt of the run: %q", id, x.Output)
			}
		}
	}
	if during == 0 {
		t.Fatal("no fire came during the run")
	}
	if _, maxIn, _ := target.stats(); maxIn != 1 {
		t.Fatalf("target saw %d requests at once: want 1", maxIn)
	}
}

func TestOverlapQueueRunsBackToBackWithOneWaiting(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	r, sink := newOverlapRunner(t, target, protocol.OverlapQueue, 0, time.Hour)
	spec, _ := r.get("t1")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := make(chan struct{})
	go func() { defer close(first); r.run(spec, t0, false) }()
	waitFor(t, "the first request", func() bool { in, _, _ := target.stats(); return in == 1 })
	r.run(spec, t0.Add(time.Second), false) // queued: returns at once
	var wg sync.WaitGroup
	for i := 2; i < 12; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); r.run(spec, t0.Add(time.Duration(i)*time.Second), false) }()
	}
	wg.Wait()
	waitFor(t, "ten skipped runs", func() bool { return len(sink.all()) == 10 })
	runs := sink.all()
	for _, s := range runs {
		if s.Result != protocol.ResultSkipped || !strings.Contains(s.Output, "was already queued behind it") {
			t.Fatalf("fire while one waits: %+v", s)
		}
	}
	target.open()
	<-first // the queued fire runs in the first run's goroutine, after it
	waitFor(t, "two runs", func() bool { return len(byResult(sink.all(), protocol.ResultSuccess)) == 2 })
	runs = byResult(sink.all(), protocol.ResultSuccess)
	if len(runs) != 2 || !runs[0].ScheduledAt.Equal(t0) || !runs[1].ScheduledAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("runs %+v: want the first fire, then the queued one", runs)
	}
	_, maxIn, spans := target.stats()
	if maxIn != 1 || len(spans) != 2 || spans[1][0].Before(spans[0][1]) {
		t.Fatalf("target spans %v, %d at once: want two runs back to back", spans, maxIn)
	}
	if runs[1].StartedAt.Before(runs[0].EndedAt) {
		t.Fatalf("queued run started %s before the first ended %s", runs[1].StartedAt, runs[0].EndedAt)
	}
}

// A fire queued behind a run of a task stopped meanwhile does not run.
func TestOverlapQueuedFireOfAStoppedTaskIsSkipped(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	r, sink := newOverlapRunner(t, target, protocol.OverlapQueue, 0, time.Hour)
	spec, _ := r.get("t1")
	first := make(chan struct{})
	go func() { defer close(first); r.fire(r.job("t1")) }()
	waitFor(t, "the first request", func() bool { in, _, _ := target.stats(); return in == 1 })
	r.run(spec, time.Now().UTC(), false)
	r.stop("t1")
	target.open()
	<-first
	waitFor(t, "two reports", func() bool { return len(sink.all()) == 2 })
	if s := byResult(sink.all(), protocol.ResultSkipped); len(s) != 1 || !strings.Contains(s[0].Output, "task was stopped") {
		t.Fatalf("runs %+v: want the queued fire skipped as stopped", sink.all())
	}
	if _, _, spans := target.stats(); len(spans) != 1 {
		t.Fatalf("target saw %d requests: want 1", len(spans))
	}
}

// Under the real schedule: a 1 s interval whose run lasts 2.5 s, policy skip.
func TestOverlapSkipUnderTheSchedule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	target := newSlowTarget(t)
	target.release, target.hold = nil, 2500*time.Millisecond
	_, sink := newOverlapRunner(t, target, protocol.OverlapSkip, 0, time.Second)
	waitFor(t, "a run and a skipped fire", func() bool {
		runs := sink.all()
		return len(byResult(runs, protocol.ResultSuccess)) >= 1 && len(byResult(runs, protocol.ResultSkipped)) >= 1
	})
	if _, maxIn, _ := target.stats(); maxIn != 1 {
		t.Fatalf("%d requests at once under skip", maxIn)
	}
}

// TestRunsReportTheVersionTheyRan: a run reports the version of the spec
// it started with; a new version whose definition is the same (a save that
// changed only its executors, say) keeps the task's schedule and is what
// the next runs report; a run in progress when a new version arrives
// reports the version it started with.
func TestRunsReportTheVersionTheyRan(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	r, sink := newOverlapRunner(t, target, protocol.OverlapAllow, 0, time.Hour)
	spec := r.job("t1").current()
	spec.Version = 7
	if err := r.start(spec); err != nil {
		t.Fatal(err)
	}
	go r.fire(r.job("t1"))
	waitFor(t, "the first request", func() bool { in, _, _ := target.stats(); return in == 1 })
	// Version 8, the same definition, arrives while version 7 runs.
	before := r.job("t1")
	spec.Version = 8
	if err := r.start(spec); err != nil {
		t.Fatal(err)
	}
	if r.job("t1") != before {
		t.Fatal("a new version of the same definition was scheduled again")
	}
	target.open()
	waitFor(t, "the first run", func() bool { return len(sink.all()) == 1 })
	go r.fire(r.job("t1"))
	waitFor(t, "the second run", func() bool { return len(sink.all()) == 2 })
	runs := sink.all()
	if runs[0].TaskVersion != 7 || runs[1].TaskVersion != 8 {
		t.Fatalf("runs report versions %d and %d, want 7 (started before version 8 came) and 8", runs[0].TaskVersion, runs[1].TaskVersion)
	}
}
