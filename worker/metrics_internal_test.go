package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// The reporter counts every run it is given and shows its queue and the
// undelivered part of its journal; fired counts fires and their lag; a nil
// *metrics records nothing.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	var none *metrics
	none.fired(time.Second)
	none.ran(protocol.ResultSuccess, time.Second)
	rec := httptest.NewRecorder()
	none.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("nil metrics handler: %d", rec.Code)
	}

	down := func(context.Context, []protocol.RunReport) (protocol.RunsResponse, error) {
		return protocol.RunsResponse{}, errors.New("master unreachable")
	}
	r := newReporter(t.TempDir(), 0, testutil.Discard(), down) // not running: nothing is delivered
	t.Cleanup(func() { r.file.Close() })
	now := time.Now().UTC()
	for i, res := range []protocol.Result{protocol.ResultFailed, protocol.ResultFailed, protocol.ResultSuccess} {
		r.add(protocol.RunReport{ID: "r" + string(rune('a'+i)), TaskID: "t1", Node: "w1", StartedAt: now, EndedAt: now,
			DurationMS: 1500, Result: res, Attempt: 1})
	}
	// The limiter's gauges: two slots held, three fires waiting.
	l := newLimiter(2)
	r.metrics.watchLimiter(l)
	if got := l.tryAcquireN(5); got != 2 {
		t.Fatalf("took %d slots of 2", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for range 3 {
		go l.acquire(ctx)
	}
	for deadline := time.Now().Add(10 * time.Second); l.waiting() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want 3", l.waiting())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.metrics.fired(40 * time.Millisecond)
	r.metrics.fired(-time.Millisecond) // a clock step back counts as no lag
	rec = httptest.NewRecorder()
	r.metrics.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sm_worker_runs_total{result="failed"} 2`, `sm_worker_runs_total{result="success"} 1`, `sm_worker_runs_total{result="timeout"} 0`,
		`sm_worker_run_duration_seconds_bucket{result="failed",le="1"} 0`, `sm_worker_run_duration_seconds_bucket{result="failed",le="2.5"} 2`,
		`sm_worker_fires_total 2`, `sm_worker_trigger_lag_seconds_count 2`, `sm_worker_trigger_lag_seconds_bucket{le="0.001"} 1`,
		`sm_worker_report_queue 3`, `sm_worker_reports_dropped_total 0`, `sm_worker_runs_waiting 3`, `sm_worker_slots_held 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^sm_build_info\{commit="[^"]+",go_version="go[^"]+",version="[^"]+"\} 1$`).MatchString(body) {
		t.Error("exposition lacks sm_build_info with its labels")
	}
	st := r.stats()
	if st.Pending != 3 || st.UnsentBytes <= 0 || st.UnsentBytes != st.JournalBytes || !strings.Contains(body, "sm_worker_report_spool_bytes ") {
		t.Errorf("stats %+v; want 3 pending and the whole journal unsent", st)
	}
}
