package protocol_test

import (
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Plan.Fires counts by Next's rules: after is excluded, until included,
// the time zone and its DST rules, the end window and the limit hold.
func TestPlanFires(t *testing.T) {
	t.Parallel()
	every := validHTTP()
	every.Schedule = protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second)}
	every.Normalize()
	from := mustTime(t, "2026-11-22T10:00:00Z")
	n, first, last := count(t, &every, from, from.Add(30*time.Second), 1000)
	if n != 30 || !first.Equal(from.Add(time.Second)) || !last.Equal(from.Add(30*time.Second)) {
		t.Fatalf("every 1s over 30s: %d from %s to %s, want 30 from +1s to +30s", n, first, last)
	}
	if n, _, last := count(t, &every, from, from.Add(time.Hour), 100); n != 100 || !last.Equal(from.Add(100*time.Second)) {
		t.Fatalf("limit 100: %d fires up to %s", n, last)
	}
	end := from.Add(10 * time.Second)
	every.EndAt = &end
	if n, _, _ := count(t, &every, from, from.Add(time.Minute), 1000); n != 10 {
		t.Fatalf("end_at +10s: %d fires, want 10", n)
	}

	// 02:30 in Berlin over the spring-forward week end: one fire a day, the
	// skipped 02:30 of 29 March at 03:00 CEST.
	daily := cronDef("30 2 * * *", "Europe/Berlin")
	n, first, last = count(t, daily, mustTime(t, "2026-03-27T12:00:00Z"), mustTime(t, "2026-03-30T12:00:00Z"), 1000)
	if n != 3 || !first.Equal(mustTime(t, "2026-03-28T01:30:00Z")) || !last.Equal(mustTime(t, "2026-03-30T00:30:00Z")) {
		t.Fatalf("Berlin 02:30 daily over spring-forward: %d from %s to %s", n, first, last)
	}
	// and once on the fall-back day.
	if n, _, _ := count(t, daily, mustTime(t, "2026-10-24T12:00:00Z"), mustTime(t, "2026-10-26T12:00:00Z"), 1000); n != 2 {
		t.Fatalf("Berlin 02:30 daily over fall-back: %d fires, want 2", n)
	}

	once := validHTTP()
	at := from.Add(5 * time.Second)
	once.Schedule = protocol.Schedule{Kind: protocol.ScheduleOnce, At: &at}
	if n, _, _ := count(t, &once, from, from.Add(time.Minute), 1000); n != 1 {
		t.Fatalf("once: %d fires, want 1", n)
	}
	if n, _, _ := count(t, &once, at, from.Add(time.Minute), 1000); n != 0 {
		t.Fatalf("once, after its fire: %d fires, want 0", n)
	}
}

// count is Fires of d's plan as n, first and last.
func count(t *testing.T, d *protocol.TaskDef, after, until time.Time, limit int) (n int, first, last time.Time) {
	t.Helper()
	c := mustPlan(t, d).Fires(after, until, limit)
	return c.N, c.First, c.Last
}
