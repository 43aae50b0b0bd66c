package worker

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// flakyMaster is the claim end of a master that can be unreachable: while
// down, claims fail as a dead connection would; up, every claim is won. It
// notes the fires it refused and the fires it granted, with the run id each
// granted claim named.
type flakyMaster struct {
	mu      sync.Mutex
	down    bool
	refused []time.Time
	granted []time.Time
	runs    map[int64]string // granted fire (UnixNano) -> run id of its claim
}

func (f *flakyMaster) claim(_ context.Context, _ string, fire time.Time, run runID) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		f.refused = append(f.refused, fire)
		return false, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	}
	f.granted = append(f.granted, fire)
	if f.runs == nil {
		f.runs = map[int64]string{}
	}
	f.runs[fire.UnixNano()] = run.String()
	return true, nil
}

// runOf returns the run id the claim granted for fire named ("" if none).
func (f *flakyMaster) runOf(fire time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[fire.UnixNano()]
}

// checkClaimedRunIDs fails unless every report is the one its fire's claim
// named: the master records a claimed fire never reported as lost under that
// id, and the report that comes after all replaces it.
func checkClaimedRunIDs(t *testing.T, master *flakyMaster, runs []protocol.RunReport) {
	t.Helper()
	for _, run := range runs {
		if want := master.runOf(run.ScheduledAt); want == "" || run.ID != want {
			t.Errorf("report %s of the fire at %s: its claim named run id %q", run.ID, run.ScheduledAt.Format(time.TimeOnly), want)
		}
	}
}

func (f *flakyMaster) set(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *flakyMaster) seen() (refused, granted []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.refused...), append([]time.Time(nil), f.granted...)
}

// newMisfireRunner is a real runner (gocron scheduler, limiter, reporter) with
// one HTTP task every second, shared by two executors so each fire is claimed
// through master, which starts down.
func newMisfireRunner(t *testing.T, misfire string, window time.Duration) (*runner, *reportSink, *flakyMaster) {
	t.Helper()
	target := newSlowTarget(t)
	target.open()
	master := &flakyMaster{down: true}
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), sink.post)
	go rep.run(ctx)
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100),
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 100 * time.Millisecond,
		claim: master.claim, misfireWindow: window,
	}
	var err error
	if r.sched, err = newTestScheduler(); err != nil {
		t.Fatal(err)
	}
	r.sched.Start()
	t.Cleanup(func() {
		_ = r.sched.Shutdown()
		cancel()
		<-rep.done
	})
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP, Misfire: misfire,
		Timeout:  protocol.Duration(20 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)},
		HTTP:     &protocol.HTTPSpec{URL: target.srv.URL}}, Executors: 2}
	if err := r.start(spec); err != nil {
		t.Fatal(err)
	}
	return r, sink, master
}

func misfireRuns(runs []protocol.RunReport) []protocol.RunReport {
	var out []protocol.RunReport
	for _, r := range byResult(runs, protocol.ResultSkipped) {
		if strings.HasPrefix(r.Output, "misfire:") {
			out = append(out, r)
		}
	}
	return out
}

func TestMisfireSkipRecordsOneSkippedRunWithTheCount(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	_, sink, master := newMisfireRunner(t, protocol.MisfireSkip, 0)
	waitFor(t, "three missed fires", func() bool { refused, _ := master.seen(); return len(refused) >= 3 })
	if runs := sink.all(); len(runs) != 0 {
		t.Fatalf("runs recorded while the master was down, before the window ended: %+v", runs)
	}
	master.set(false)
	waitFor(t, "the misfire record and two runs after it", func() bool {
		runs := sink.all()
		return len(misfireRuns(runs)) == 1 && len(byResult(runs, protocol.ResultSuccess)) >= 2
	})
	refused, _ := master.seen()
	runs := sink.all()
	skipped := misfireRuns(runs)
	if len(skipped) != 1 {
		t.Fatalf("%d misfire records, want 1: %+v", len(skipped), skipped)
	}
	s := skipped[0]
	want := "misfire: no master reachable to claim " + itoa(len(refused)) + " fires from " + refused[0].Format(time.RFC3339)
	if !strings.HasPrefix(s.Output, want) || !strings.Contains(s.Output, "connection refused") {
		t.Fatalf("misfire record says %q, want it to start %q", s.Output, want)
	}
	if !s.ScheduledAt.Equal(refused[0]) {
		t.Fatalf("misfire record scheduled at %s, want the first missed fire %s", s.ScheduledAt, refused[0])
	}
	// The misfire record answers the claim of the first missed fire, each
	// run the claim of its fire: each carries the run id its claim named.
	checkClaimedRunIDs(t, master, runs)
	for _, run := range byResult(runs, protocol.ResultSuccess) {
		if !run.ScheduledAt.After(refused[len(refused)-1]) {
			t.Fatalf("a missed fire ran under skip: %+v", run)
		}
	}
}

func TestMisfireSkipFlushesALongOutagePerWindow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	_, sink, master := newMisfireRunner(t, protocol.MisfireSkip, 2*time.Second)
	waitFor(t, "a window recorded while the master stays down", func() bool { return len(misfireRuns(sink.all())) >= 1 })
	s := misfireRuns(sink.all())[0]
	if !strings.Contains(s.Output, "no master reachable to claim 3 fires") {
		t.Fatalf("window record says %q, want 3 fires (2 s window, a fire a second)", s.Output)
	}
	if _, granted := master.seen(); len(granted) != 0 {
		t.Fatalf("claims granted while down: %v", granted)
	}
}

func TestMisfireRunOnceRunsOneCatchUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for real schedule points")
	}
	_, sink, master := newMisfireRunner(t, protocol.MisfireRunOnce, 0)
	waitFor(t, "three missed fires", func() bool { refused, _ := master.seen(); return len(refused) >= 3 })
	master.set(false)
	refused, _ := master.seen()
	waitFor(t, "the catch-up run and two scheduled runs", func() bool {
		return len(byResult(sink.all(), protocol.ResultSuccess)) >= 3
	})
	refused2, granted := master.seen()
	// A fire may have been refused between reading refused and set(false).
	first := refused[0]
	catchUp := 0
	for _, run := range byResult(sink.all(), protocol.ResultSuccess) {
		switch {
		case run.ScheduledAt.Equal(first):
			catchUp++
		case !run.ScheduledAt.After(refused2[len(refused2)-1]):
			t.Fatalf("a missed fire other than the first ran: %+v", run)
		}
	}
	if catchUp != 1 {
		t.Fatalf("%d catch-up runs at %s, want 1 (granted %v)", catchUp, first, granted)
	}
	checkClaimedRunIDs(t, master, sink.all())
	if n := len(misfireRuns(sink.all())); n != 0 {
		t.Fatalf("%d misfire skipped records under run_once", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Claims of consecutive fires fail in any order (each is a call of its
// own): the window still runs from the earliest missed fire to the latest,
// and it is recorded once it spans the misfire window.
func TestMisfireWindowSpansFiresClaimedOutOfOrder(t *testing.T) {
	t.Parallel()
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), sink.post)
	go rep.run(ctx)
	t.Cleanup(func() { cancel(); <-rep.done })
	r := &runner{log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(1), reports: rep,
		ctx: ctx, jobs: map[string]*taskJob{}, misfireWindow: 2 * time.Second}
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP}}
	base := time.Date(2026, 11, 26, 21, 2, 5, 0, time.UTC)
	down := errors.New("master down")
	for _, s := range []int{1, 0, 2} { // :06 fails first, then :05, then :07
		r.misfired(spec, base.Add(time.Duration(s)*time.Second), down)
	}
	waitFor(t, "the window's record", func() bool { return len(misfireRuns(sink.all())) == 1 })
	got := misfireRuns(sink.all())[0]
	want := "misfire: no master reachable to claim 3 fires from 2026-11-26T21:02:05Z to 2026-11-26T21:02:07Z"
	if !strings.HasPrefix(got.Output, want) || !got.ScheduledAt.Equal(base) {
		t.Fatalf("record %q at %s; want %q at the earliest fire %s", got.Output, got.ScheduledAt, want, base)
	}
}
