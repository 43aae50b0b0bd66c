// Task health: success rate, duration percentiles and the latest failures
// of a task, read from its last runs.

package master

import (
	"context"
	"slices"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// HealthWindow is how many of a task's latest runs its health is read from.
const HealthWindow = 50

// FailingStreak is how many failed runs in a row, the latest ones, mark a
// task as failing in the task list.
const FailingStreak = 3

// TaskHealth is how a task's last runs went: over the latest Window run
// records, Runs ran (skipped ones, runs still going and results it does not
// know are left out of every figure, see protocol.Result.CountsInHealth), SuccessRate of them succeeded, and their durations' p50 and p95
// (nearest rank). The rate and percentiles are null when no run ran.
type TaskHealth struct {
	Runs        int      `json:"runs"`
	SuccessRate *float64 `json:"success_rate"`
	P50MS       *int64   `json:"p50_ms"`
	P95MS       *int64   `json:"p95_ms"`
	// LastFailedStreak is how many of the latest runs in a row did not
	// succeed (skipped ones are passed over); 0 when the latest succeeded.
	LastFailedStreak int `json:"last_failed_streak"`
	// Window is how many latest run records were read; Skipped of them did
	// not count (skipped, still going).
	Window  int `json:"window"`
	Skipped int `json:"skipped"`
	// Recent are the run records read, newest first, for the task page's chart.
	Recent []store.RunPoint `json:"-"`
}

// Failing reports whether the latest FailingStreak runs or more all failed.
func (h *TaskHealth) Failing() bool { return h != nil && h.LastFailedStreak >= FailingStreak }

// ComputeHealth reads the figures from a task's latest run records, newest
// first, of which window were asked for.
func ComputeHealth(recent []store.RunPoint, window int) TaskHealth {
	h := TaskHealth{Window: window, Recent: recent}
	var durations []int64
	ok, streakOver := 0, false
	for _, r := range recent {
		res := protocol.Result(r.Result)
		if !res.CountsInHealth() {
			h.Skipped++
			continue
		}
		durations = append(durations, r.DurationMS)
		if res.Succeeded() {
			ok++
			streakOver = true
		} else if !streakOver {
			h.LastFailedStreak++
		}
	}
	h.Runs = len(durations)
	if h.Runs == 0 {
		return h
	}
	rate := float64(ok) / float64(h.Runs)
	h.SuccessRate = &rate
	slices.Sort(durations)
	p50, p95 := percentile(durations, 50), percentile(durations, 95)
	h.P50MS, h.P95MS = &p50, &p95
	return h
}

// percentile is the nearest-rank percentile of sorted values: the smallest
// value with at least p percent of the values at or below it.
func percentile(sorted []int64, p int) int64 {
	rank := (p*len(sorted) + 99) / 100 // ceil(p% of n), in integers: no rounding error
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// TasksHealth reads the health of each task of ids from its latest window
// runs, in one query for up to a hundred tasks. Every id gets a health, a
// task without runs one with Runs 0.
func (r *Reads) TasksHealth(ctx context.Context, ids []string, window int) (map[string]*TaskHealth, error) {
	recent, err := store.LastRuns(ctx, r.db, ids, window)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*TaskHealth, len(ids))
	for _, id := range ids {
		h := ComputeHealth(recent[id], window)
		out[id] = &h
	}
	return out, nil
}
