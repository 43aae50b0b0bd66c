package worker

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// newLiveRunner is a real runner and reporter, shell allowed, whose notice
// loop announces runs that last noticeAfter.
func newLiveRunner(t *testing.T, noticeAfter time.Duration) (*runner, *reportSink) {
	t.Helper()
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), sink.post)
	go rep.run(ctx)
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100), shell: true,
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 50 * time.Millisecond,
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return true, nil },
	}
	r.live.noticeAfter = noticeAfter // set before the loop starts: it reads the field
	done := make(chan struct{})
	go r.noticeLoop(ctx, done)
	t.Cleanup(func() {
		cancel()
		<-done
		<-rep.done
	})
	return r, sink
}

// onlyLiveRun waits for the one attempt in progress and returns its id.
func onlyLiveRun(t *testing.T, r *runner) string {
	t.Helper()
	var id string
	waitFor(t, "a run in progress", func() bool {
		r.live.mu.Lock()
		defer r.live.mu.Unlock()
		for k := range r.live.runs {
			id = k.String()
		}
		return len(r.live.runs) == 1
	})
	return id
}

// finalReport waits for the final report of run id.
func finalReport(t *testing.T, sink *reportSink, id string) protocol.RunReport {
	t.Helper()
	var got protocol.RunReport
	waitFor(t, "the final report of "+id, func() bool {
		for _, rep := range sink.all() {
			if rep.ID == id && rep.Result != protocol.ResultRunning {
				got = rep
				return true
			}
		}
		return false
	})
	return got
}

func TestKillAbandonsAnHTTPRunAndDoesNotRetryIt(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t) // holds every request until released
	defer target.open()
	r, sink := newLiveRunner(t, 50*time.Millisecond)
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP, Retries: 2,
		Timeout:  protocol.Duration(30 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		HTTP:     &protocol.HTTPSpec{Method: http.MethodPost, URL: target.srv.URL + "/hook?token=secret"}}, Executors: 1}
	r.runOnce(spec, nil)
	id := onlyLiveRun(t, r)

	p, ok := r.live.progress(id)
	if !ok || p.TaskID != "t1" || p.Attempt != 1 {
		t.Fatalf("progress of %s = %+v, %v", id, p, ok)
	}
	if !strings.Contains(p.Waiting, "POST "+target.srv.URL+"/hook") || strings.Contains(p.Waiting, "secret") {
		t.Fatalf("waiting = %q: want the method and URL without its query", p.Waiting)
	}
	// The start notice goes out once the run has lasted noticeAfter.
	waitFor(t, "the start notice", func() bool {
		for _, rep := range sink.all() {
			if rep.ID == id && rep.Result == protocol.ResultRunning {
				return rep.EndedAt.IsZero() && rep.TaskID == "t1" && rep.Node == "w1" && rep.Validate() == nil
			}
		}
		return false
	})

	if !r.live.kill(id, "alice") {
		t.Fatal("kill of a run in progress said it was not here")
	}
	final := finalReport(t, sink, id)
	if final.Result != protocol.ResultKilled || !strings.Contains(final.Output, "[killed by alice]") {
		t.Fatalf("final report = %s %q, want killed by alice", final.Result, final.Output)
	}
	if err := final.Validate(); err != nil {
		t.Fatalf("final report invalid: %v", err)
	}
	if r.live.kill(id, "alice") {
		t.Fatal("kill of an ended run said it was in progress")
	}
	if _, ok := r.live.progress(id); ok {
		t.Fatal("an ended run still has progress")
	}
	// Retries: 2, yet a killed run is not tried again.
	waitFor(t, "the target to see the request end", func() bool { in, _, _ := target.stats(); return in == 0 })
	time.Sleep(300 * time.Millisecond) // longer than the first retry's backoff (50 ms): no attempt may start
	if n := r.live.count(); n != 0 {
		t.Fatalf("%d attempts in progress after a kill: a killed run was retried", n)
	}
	_, _, spans := target.stats()
	if len(spans) != 1 {
		t.Fatalf("target saw %d requests, want 1 (no retry after a kill)", len(spans))
	}
}

func TestKillEndsAShellRunsWholeProcessGroupAndShowsItsOutput(t *testing.T) {
	t.Parallel()
	r, sink := newLiveRunner(t, 50*time.Millisecond)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t2", Title: "t", Type: protocol.TaskShell,
		Timeout:  protocol.Duration(60 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Shell:    &protocol.ShellSpec{Command: "sleep 300 & echo $! > " + pidFile + "; echo line one; echo line two >&2; wait"}},
		Executors: 1}
	r.runOnce(spec, nil)
	id := onlyLiveRun(t, r)
	var p protocol.RunProgress
	waitFor(t, "the output so far", func() bool {
		p, _ = r.live.progress(id)
		return strings.Contains(p.Output, "line one") && strings.Contains(p.Output, "line two")
	})
	if p.OutputBytes != int64(len("line one\nline two\n")) || p.Waiting != "" {
		t.Fatalf("progress = %+v", p)
	}
	var child int
	waitFor(t, "the child's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	if err := syscall.Kill(child, 0); err != nil {
		t.Fatalf("the command's child %d is not running before the kill: %v", child, err)
	}

	if !r.live.kill(id, "token:ops") {
		t.Fatal("kill said the run is not here")
	}
	final := finalReport(t, sink, id)
	if final.Result != protocol.ResultKilled || !strings.Contains(final.Output, "line one") ||
		!strings.Contains(final.Output, "[killed by token:ops]") {
		t.Fatalf("final report = %s %q", final.Result, final.Output)
	}
	// The background sleep was in the command's process group: gone too
	// (reaped by init once its parent shell died).
	waitFor(t, "the child process to be gone", func() bool {
		return procStart(child) == "" // gone, or a zombie
	})
}

func TestShortRunsSendNoStartNotice(t *testing.T) {
	t.Parallel()
	target := newSlowTarget(t)
	target.open() // answers at once
	r, sink := newLiveRunner(t, time.Hour)
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t3", Title: "t", Type: protocol.TaskHTTP,
		Timeout:  protocol.Duration(10 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		HTTP:     &protocol.HTTPSpec{URL: target.srv.URL}}, Executors: 1}
	for range 5 {
		r.runOnce(spec, nil)
	}
	waitFor(t, "5 reports", func() bool { return len(sink.all()) >= 5 })
	time.Sleep(2 * noticeEvery) // a notice loop pass after the runs ended
	for _, rep := range sink.all() {
		if rep.Result != protocol.ResultSuccess {
			t.Fatalf("report %s: result %s, want only the 5 successes (no start notices)", rep.ID, rep.Result)
		}
	}
	if n := len(sink.all()); n != 5 {
		t.Fatalf("%d reports, want 5", n)
	}
	if n := r.live.count(); n != 0 {
		t.Fatalf("%d runs still listed in progress", n)
	}
}

func TestParseRunIDReadsWhatStringWrites(t *testing.T) {
	t.Parallel()
	var g runIDs
	for range 3 {
		id := g.next()
		got, ok := parseRunID(id.String())
		if !ok || got != id {
			t.Fatalf("parseRunID(%s) = %v, %v", id, got, ok)
		}
	}
	for _, bad := range []string{"", "x", "0000000000000000000000000000000000000", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
		"00000000_0000-0000-0000-000000000000", "00000000-0000-0000-0000-00000000000\x00"} {
		if _, ok := parseRunID(bad); ok {
			t.Errorf("parseRunID(%q) accepted it", bad)
		}
	}
}

// count is how many attempts are in progress.
func (l *liveRuns) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.runs)
}
