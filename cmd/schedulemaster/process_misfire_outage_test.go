package main

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// misfireSpan reads the fires a skipped misfire run stands for: "N fires
// from A to B", or the one fire at its scheduled time.
var misfireSpan = regexp.MustCompile(`(\d+) fires from (\S+) to (\S+)`)

// covered lists, per second, how many records account for that fire: a
// successful run, or a misfire record's span.
func covered(t *testing.T, runs []runJSON) map[time.Time]int {
	t.Helper()
	out := map[time.Time]int{}
	for _, r := range runs {
		switch {
		case r.Result == "success" && r.Attempt == 1:
			out[r.ScheduledAt.UTC()]++
		case r.Result == "skipped" && strings.HasPrefix(r.Output, "misfire: "):
			m := misfireSpan.FindStringSubmatch(r.Output)
			if m == nil {
				out[r.ScheduledAt.UTC()]++
				continue
			}
			n, _ := strconv.Atoi(m[1])
			first, err1 := time.Parse(time.RFC3339, m[2])
			last, err2 := time.Parse(time.RFC3339, m[3])
			if err1 != nil || err2 != nil || last.Sub(first) != time.Duration(n-1)*time.Second {
				t.Fatalf("misfire record %q: span does not match its count", r.Output)
			}
			for s := first; !s.After(last); s = s.Add(time.Second) {
				out[s.UTC()]++
			}
		}
	}
	return out
}

// A worker restarted while its only master is down gets its task back when
// the master returns; the master sees it down only then. Every fire of the
// outage is accounted for once: run, or in a misfire record, by the worker
// (the fires before the master saw it down) or by the master (those after).
// Before down_since the worker dropped its count whenever the master had seen
// it down, and the fires from its stop to the master's return had no record.
func TestProcessWorkerRestartedWhileItsMasterIsDownLosesNoFire(t *testing.T) {
	t.Parallel()
	tg := newTarget(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	mdir, wdir := t.TempDir(), t.TempDir()
	m := startMaster(t, mdir, "--listen", listen)
	w, _ := startWorker(t, m, "ow1", "--data-dir", wdir)
	waitFor(t, 60*time.Second, "ow1 running", func() bool { n := m.node("ow1"); return n != nil && n.Status == 2 })
	tk := m.createTask(fmt.Sprintf(`{"title":"every second","type":"http","schedule":{"kind":"interval","every":"1s"},
		"http":{"url":%q},"executors":["ow1"],"misfire":"skip"}`, tg.URL+"/ow"))
	m.taskAction(tk.ID, "start")
	m.waitRuns(tk.ID, 60*time.Second, "two runs", func(rs []runJSON) bool { return len(rs) >= 2 })

	// The master dies; then the worker is restarted while it is down.
	m.kill()
	if err := w.term(); err != nil {
		t.Fatal(err)
	}
	w2, _ := startWorker(t, m, "ow1", "--data-dir", wdir)
	defer w2.kill()
	down := time.Now()
	// The outage the test needs: the restarted worker is up and has found
	// its master down (a failed registration), and four seconds of fires
	// have passed meanwhile (a length, which load only makes longer).
	waitFor(t, 90*time.Second, "the restarted worker finding its master down, four fires into the outage", func() bool {
		return w2.logged("registration with the master failed") && time.Since(down) > 4*time.Second
	})
	back := time.Now()
	m2 := startMaster(t, mdir, "--listen", listen)

	// Every fire from the first run until the worker runs the task again is
	// accounted for exactly once.
	var first, again time.Time
	var last map[time.Time]int
	var runs []runJSON
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range runs {
				t.Logf("run %s %s attempt %d: %.160s", r.ScheduledAt.UTC().Format(time.RFC3339), r.Result, r.Attempt, r.Output)
			}
		}
	})
	// Generous: the worker registers again on a backoff (up to 30 s
	// between tries), then gets its task back and reports.
	waitFor(t, 3*time.Minute, "every fire of the outage accounted for", func() bool {
		runs = m2.runs(tk.ID)
		last = covered(t, runs)
		first, again = time.Time{}, time.Time{}
		for _, r := range runs {
			at := r.ScheduledAt.UTC()
			if r.Result == "success" && (first.IsZero() || at.Before(first)) {
				first = at
			}
			if r.Result == "success" && at.After(back) && (again.IsZero() || at.Before(again)) {
				again = at
			}
		}
		if first.IsZero() || again.IsZero() {
			return false
		}
		for s := first; s.Before(again); s = s.Add(time.Second) {
			if last[s] == 0 {
				return false
			}
		}
		return true
	})
	var seconds []time.Time
	for s := range last {
		seconds = append(seconds, s)
	}
	sort.Slice(seconds, func(i, j int) bool { return seconds[i].Before(seconds[j]) })
	for _, s := range seconds {
		if !s.Before(first) && s.Before(again) && last[s] != 1 {
			t.Fatalf("the fire at %s is accounted for %d times, want once (runs: %+v)", s.Format(time.RFC3339), last[s], m2.runs(tk.ID))
		}
	}
	if again.Sub(first) < 5*time.Second {
		t.Fatalf("the outage spans %s to %s: too short to prove anything", first, again)
	}
}
