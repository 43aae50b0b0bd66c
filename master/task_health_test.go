package master_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// healthRun is one run of a health test, newest first in its list.
type healthRun struct {
	result string
	ms     int64
}

// storeHealthRuns stores runs of task, the first the newest, a second apart.
func (e *env) storeHealthRuns(task string, base time.Time, runs []healthRun) {
	e.t.Helper()
	rows := make([]store.Run, len(runs))
	for i, r := range runs {
		at := base.Add(-time.Duration(i) * time.Second)
		rows[i] = store.Run{ID: fmt.Sprintf("%s-%03d", task, i), TaskID: task, Node: "w1", ScheduledAt: at, StartedAt: at,
			EndedAt: at.Add(time.Duration(r.ms) * time.Millisecond), DurationMS: r.ms, Result: r.result, Attempt: 1}
	}
	if _, err := store.InsertRuns(e.ctx, e.s.Store.DB, rows); err != nil {
		e.t.Fatal(err)
	}
}

// TestTaskHealthFigures stores runs of known durations and results and
// checks the exact figures, on both databases: the rate and the nearest-rank
// p50/p95 over the runs that ran (skipped ones left out), the streak of the
// latest failures, and the window of the latest runs only.
func TestTaskHealthFigures(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		e := newEnv(t, s)
		base := time.Date(2030, 3, 1, 10, 0, 0, 0, time.UTC)
		// mixed: 20 runs that ran, of durations 10, 20, ... 200 ms, and 2
		// skipped; the latest three that ran failed or timed out.
		mixed := []healthRun{
			{"skipped", 0}, {"failed", 200}, {"failed", 10}, {"skipped", 0}, {"timeout", 150}, {"success", 20},
		}
		for _, ms := range []int64{30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 160, 170, 180, 190} {
			r := "success"
			if ms == 100 {
				r = "failed"
			}
			mixed = append(mixed, healthRun{r, ms})
		}
		e.storeHealthRuns("mixed", base, mixed)
		// long: 120 successes, newest 120 ms, then 119 ... 1: only the latest 50 count.
		var long []healthRun
		for ms := int64(120); ms >= 1; ms-- {
			long = append(long, healthRun{"success", ms})
		}
		e.storeHealthRuns("long", base, long)
		e.storeHealthRuns("down", base, []healthRun{{"failed", 5}, {"timeout", 9}, {"failed", 7}, {"failed", 1}, {"failed", 3}})
		e.storeHealthRuns("ok-now", base, []healthRun{{"success", 4}, {"failed", 5}, {"failed", 6}, {"failed", 7}})
		// A run still going and a result this master does not know are left
		// out; a killed run is a failure.
		e.storeHealthRuns("odd", base, []healthRun{{"running", 0}, {"killed", 50}, {"unheard-of", 999}, {"success", 10}})

		hs, err := e.m.Reads().TasksHealth(e.ctx, []string{"mixed", "long", "down", "ok-now", "odd", "never"}, master.HealthWindow)
		if err != nil {
			t.Fatal(err)
		}
		type want struct {
			runs, skipped, streak int
			rate                  float64
			p50, p95              int64
			failing               bool
		}
		cases := map[string]want{
			"mixed":  {runs: 20, skipped: 2, streak: 3, rate: 0.8, p50: 100, p95: 190, failing: true},
			"long":   {runs: 50, streak: 0, rate: 1, p50: 95, p95: 118},
			"down":   {runs: 5, streak: 5, rate: 0, p50: 5, p95: 9, failing: true},
			"ok-now": {runs: 4, streak: 0, rate: 0.25, p50: 5, p95: 7},
			"odd":    {runs: 2, skipped: 2, streak: 1, rate: 0.5, p50: 10, p95: 50},
		}
		for id, w := range cases {
			h := hs[id]
			if h == nil || h.SuccessRate == nil || h.P50MS == nil || h.P95MS == nil {
				t.Fatalf("%s: health %+v", id, h)
			}
			if h.Runs != w.runs || h.Skipped != w.skipped || h.LastFailedStreak != w.streak || *h.SuccessRate != w.rate ||
				*h.P50MS != w.p50 || *h.P95MS != w.p95 || h.Failing() != w.failing || h.Window != master.HealthWindow {
				t.Errorf("%s: runs %d skipped %d streak %d rate %v p50 %d p95 %d failing %v window %d; want %+v",
					id, h.Runs, h.Skipped, h.LastFailedStreak, *h.SuccessRate, *h.P50MS, *h.P95MS, h.Failing(), h.Window, w)
			}
		}
		if n := len(hs["long"].Recent); n != master.HealthWindow || hs["long"].Recent[0].DurationMS != 120 {
			t.Errorf("long: %d recent runs, newest %d ms; want the latest %d, newest 120 ms", n, hs["long"].Recent[0].DurationMS, master.HealthWindow)
		}
		never := hs["never"]
		if never == nil || never.Runs != 0 || never.SuccessRate != nil || never.P50MS != nil || never.Failing() {
			t.Fatalf("a task without runs: %+v, want runs 0 and no figures", never)
		}
	})
}
