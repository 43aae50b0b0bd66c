package master_test

import (
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
	"github.com/schedulemaster-go/schedulemaster/worker"
)

// A worker whose clock is 3 s fast is flagged at its registration (node,
// reason, event, metric); the health probes keep measuring it, and once its
// clock is right again the flag goes and an event says so.
func TestClockSkewIsMeasuredAtRegistrationAndProbes(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, s storetest.NamedStore) {
		metrics := master.NewMetrics()
		e := newEnv(t, s, func(c *master.Config) { c.Metrics = metrics })
		url := e.serveMaster()
		var offset atomic.Int64
		offset.Store(int64(3 * time.Second))
		tw := startWorker(t, "fast1", autoCfg(url), func(c *worker.Config) {
			c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		})
		runWorker(t, tw.W)

		near := func(n *store.Node, want time.Duration) bool {
			skew, known := master.NodeClockSkew(n)
			return known && (skew-want).Abs() < 500*time.Millisecond
		}
		n := e.node("fast1")
		if !near(n, 3*time.Second) || !master.NodeClockSkewed(n) {
			t.Fatalf("after registration: clock_skew_ms = %v, want about 3000, skewed", n.ClockSkewMS)
		}
		skew, _ := master.NodeClockSkew(n)
		// A registration has no round trip to halve: its transit counts.
		if r := master.ClockSkewReason(skew); !regexp.MustCompile(`^its clock is (2\.[5-9]|3\.[0-4]) s ahead of the master's$`).MatchString(r) {
			t.Errorf("reason = %q", r)
		}
		events := func(action string) []store.Event {
			evs, _, err := e.m.Reads().ListEvents(e.ctx, store.EventFilter{Action: action, Target: "fast1"})
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}
		storetest.Eventually(t, 10*time.Second, func() bool { return len(events("node.clock_skew")) == 1 },
			"no node.clock_skew event after a registration 3 s ahead")
		if d := events("node.clock_skew")[0].Detail; !strings.Contains(d, "ahead of the master's") {
			t.Errorf("node.clock_skew detail = %q", d)
		}

		// The metric reads the database: every master serves it.
		gauge := func() (float64, bool) {
			fams, err := metrics.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fams {
				if f.GetName() != "sm_node_clock_skew_seconds" {
					continue
				}
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "node" && l.GetValue() == "fast1" {
							return m.GetGauge().GetValue(), true
						}
					}
				}
			}
			return 0, false
		}
		if v, ok := gauge(); !ok || v < 2.5 || v > 3.5 {
			t.Errorf("sm_node_clock_skew_seconds{node=fast1} = %v (present %v), want about 3", v, ok)
		}

		// A probe measures it again: still skewed, no second event.
		if res := e.m.Sweep(e.ctx); res.Healthy != 1 {
			t.Fatalf("sweep = %+v", res)
		}
		if n := e.node("fast1"); !near(n, 3*time.Second) {
			t.Errorf("after a probe: clock_skew_ms = %v, want about 3000", n.ClockSkewMS)
		}
		if got := len(events("node.clock_skew")); got != 1 {
			t.Errorf("%d node.clock_skew events after a probe of a steady skew, want 1", got)
		}

		// Its clock is set right: the next probe clears the flag, with an event.
		offset.Store(0)
		if res := e.m.Sweep(e.ctx); res.Healthy != 1 {
			t.Fatalf("sweep = %+v", res)
		}
		if n := e.node("fast1"); !near(n, 0) || master.NodeClockSkewed(n) {
			t.Errorf("after the clock is right: clock_skew_ms = %v, want about 0, not skewed", n.ClockSkewMS)
		}
		storetest.Eventually(t, 10*time.Second, func() bool { return len(events("node.clock_ok")) == 1 },
			"no node.clock_ok event once the clock is right")
		if v, ok := gauge(); !ok || v < -0.5 || v > 0.5 {
			t.Errorf("sm_node_clock_skew_seconds{node=fast1} = %v (present %v), want about 0", v, ok)
		}
	})
}

// A worker reports its own clock, offset ones included.
func TestWorkerReportsItsClock(t *testing.T) {
	t.Parallel()
	for _, off := range []time.Duration{0, 3 * time.Second, -2 * time.Second} {
		tw := startWorker(t, "clock1", func(c *worker.Config) { c.Now = worker.OffsetClock(off) })
		before := time.Now()
		h := tw.W.Health()
		after := time.Now()
		got := time.UnixMilli(h.WorkerTimeMS)
		if got.Before(before.Add(off).Add(-time.Millisecond)) || got.After(after.Add(off).Add(time.Millisecond)) {
			t.Errorf("offset %s: worker_time_ms = %s, want within [%s, %s]", off, got, before.Add(off), after.Add(off))
		}
	}
}
