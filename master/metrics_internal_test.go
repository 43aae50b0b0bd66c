package master

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// A master without metrics records nothing and does not fail.
func TestNilMetricsRecordNothing(t *testing.T) {
	t.Parallel()
	var x *Metrics
	x.claim(time.Now(), claimResult{Won: true}, nil)
	x.runsIngested([]store.Run{{Result: store.ResultSuccess}})
	x.probe(time.Millisecond, errors.New("down"))
	x.attach(nil)
	if x.Registry() != nil {
		t.Fatal("nil metrics have a registry")
	}
	rec := httptest.NewRecorder()
	x.Handler(testutil.Discard()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("nil metrics handler: %d", rec.Code)
	}
}

// The recording methods count what they are given, by label.
func TestMetricsCountByLabel(t *testing.T) {
	t.Parallel()
	x := NewMetrics()
	ended := time.Now()
	x.runsIngested([]store.Run{{Result: store.ResultSuccess, DurationMS: 1500, EndedAt: ended}, {Result: store.ResultFailed, DurationMS: 20, EndedAt: ended},
		{Result: store.ResultFailed, DurationMS: 30, EndedAt: ended}, {Result: store.ResultRunning}}) // the last one is in progress
	x.claim(time.Now(), claimResult{Won: true, Winner: "w1"}, nil)
	x.claim(time.Now(), claimResult{Winner: "w1"}, nil)
	x.claim(time.Now(), claimResult{}, nil)
	x.claim(time.Now(), claimResult{}, errors.New("db down"))
	x.probe(2*time.Millisecond, nil)
	x.probe(3*time.Second, errors.New("timeout"))
	rec := httptest.NewRecorder()
	x.Handler(testutil.Discard()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`sm_master_runs_ingested_total{result="success"} 1`, `sm_master_runs_ingested_total{result="failed"} 2`,
		`sm_master_runs_ingested_total{result="timeout"} 0`, `sm_master_run_duration_seconds_count{result="failed"} 2`,
		`sm_master_run_duration_seconds_bucket{result="success",le="1"} 0`, `sm_master_run_duration_seconds_bucket{result="success",le="2.5"} 1`,
		`sm_master_fires_claimed_total 1`, `sm_master_claims_total{outcome="won"} 1`, `sm_master_claims_total{outcome="lost"} 1`,
		`sm_master_claims_total{outcome="none"} 1`, `sm_master_claims_total{outcome="error"} 1`, `sm_master_claim_duration_seconds_count 4`,
		`sm_master_probe_failures_total 1`, `sm_master_probe_duration_seconds_count 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// The health history keeps a node's first probe, every change, every
// failure of a node not offline, and otherwise one probe per interval.
func TestHealthSamplerKeeps(t *testing.T) {
	t.Parallel()
	var s healthSampler
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	up := &store.Node{Name: "w1", Status: store.StatusRunning}
	down := &store.Node{Name: "w1", Status: store.StatusOffline}
	steps := []struct {
		node *store.Node
		ok   bool
		at   time.Duration
		keep bool
	}{
		{up, true, 0, true},                 // first
		{up, true, 10 * time.Second, false}, // within the minute
		{up, true, 50 * time.Second, false},
		{up, true, 61 * time.Second, true},     // a minute after the last kept
		{up, false, 70 * time.Second, true},    // a failure
		{up, false, 80 * time.Second, true},    // and the next: the node is not offline yet
		{down, false, 90 * time.Second, false}, // offline and still failing: once a minute
		{down, false, 141 * time.Second, true},
		{down, true, 150 * time.Second, true}, // it answers again
	}
	for i, st := range steps {
		if got := s.keep(st.node, st.ok, t0.Add(st.at), time.Minute); got != st.keep {
			t.Errorf("step %d (%+v): keep = %v, want %v", i, st, got, st.keep)
		}
	}
	s.forget(t0.Add(time.Hour))
	if len(s.last) != 0 {
		t.Errorf("forget kept %v", s.last)
	}
}
