package protocol_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func spreadDef(id string, every time.Duration, align string) *protocol.TaskDef {
	return &protocol.TaskDef{ID: id, Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(every), Align: align}}
}

func TestIntervalPhaseIsStableAndSpread(t *testing.T) {
	// Stable: the same id and interval give the same offset, on every call
	// (and so on every node and after every restart: the hash is fixed).
	if a, b := protocol.IntervalPhase("task-1", time.Hour), protocol.IntervalPhase("task-1", time.Hour); a != b {
		t.Fatalf("phase moved: %s then %s", a, b)
	}
	// Pinned values: a change to the hash would move every spread task's
	// times on upgrade.
	const id = "6f1c2e0a-0000-4000-8000-000000000001"
	if got := protocol.IntervalPhase(id, time.Hour); got != 31*time.Minute+52*time.Second {
		t.Fatalf("hourly phase of %s is %s, pinned at 31m52s", id, got)
	}
	if got := protocol.IntervalPhase(id, 24*time.Hour); got != 12*time.Hour+58*time.Minute {
		t.Fatalf("daily phase of %s is %s, pinned at 12h58m0s", id, got)
	}
	if got, _ := protocol.ExpandHashed("H H * * *", id); got != "5 23 * * *" {
		t.Fatalf("H H * * * of %s is %q, pinned at \"5 23 * * *\"", id, got)
	}
	if p := protocol.IntervalPhase("x", time.Second); p != 0 {
		t.Fatalf("a 1s interval has no room for a phase, got %s", p)
	}
	// Spread: 10,000 hourly tasks land in many distinct seconds, none in
	// more than a few dozen at once (a uniform spread puts about 2.8 in each).
	for _, every := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour} {
		const tasks = 10000
		per := map[time.Duration]int{}
		for i := range tasks {
			p := protocol.IntervalPhase(fmt.Sprintf("task-%d", i), every)
			if p < 0 || p >= every || p%time.Second != 0 {
				t.Fatalf("phase %s out of [0, %s) or not whole seconds", p, every)
			}
			per[p]++
		}
		slots := min(int(every/time.Second), 3600)
		most := 0
		for _, n := range per {
			most = max(most, n)
		}
		if len(per) < slots*9/10 || most > 4*tasks/slots+10 {
			t.Fatalf("every %s: %d tasks in %d distinct offsets (of %d), at most %d in one", every, tasks, len(per), slots, most)
		}
	}
}

func TestSpreadPlanFiresAtItsPhase(t *testing.T) {
	d := spreadDef("task-42", time.Hour, protocol.AlignSpread)
	plan, err := protocol.NewPlan(d)
	if err != nil {
		t.Fatal(err)
	}
	phase := protocol.IntervalPhase("task-42", time.Hour)
	if plan.Phase() != phase {
		t.Fatalf("plan phase %s, want %s", plan.Phase(), phase)
	}
	from := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	fires := plan.Preview(from, 3)
	for i, f := range fires {
		want := from.Add(phase + time.Duration(i)*time.Hour)
		if phase == 0 {
			want = want.Add(time.Hour)
		}
		if !f.Equal(want) {
			t.Fatalf("fire %d at %s, want %s", i, f, want)
		}
		if !plan.IsFire(f) || plan.IsFire(f.Add(time.Second)) {
			t.Fatalf("IsFire disagrees with Preview at %s", f)
		}
		// A timer going off a little early or late names the same fire.
		for _, skew := range []time.Duration{-150 * time.Millisecond, 0, 3 * time.Second, 31 * time.Minute, 59 * time.Minute} {
			if got := plan.FireOf(f.Add(skew)); !got.Equal(f) {
				t.Fatalf("FireOf(%s%+v) = %s, want %s", f, skew, got, f)
			}
		}
	}
	c := plan.Fires(from, from.Add(5*time.Hour), 100)
	if c.N != 5 || !c.First.Equal(fires[0]) || !c.Last.Equal(fires[0].Add(4*time.Hour)) {
		t.Fatalf("Fires over 5h: %+v (first fire %s)", c, fires[0])
	}
	// Epoch and "" (a task stored before alignments) fire on the hour.
	for _, align := range []string{protocol.AlignEpoch, ""} {
		p, _ := protocol.NewPlan(spreadDef("task-42", time.Hour, align))
		if got := p.Preview(from, 1)[0]; !got.Equal(from.Add(time.Hour)) {
			t.Fatalf("align %q: first fire %s, want %s", align, got, from.Add(time.Hour))
		}
	}
}

func TestSpreadValidation(t *testing.T) {
	now := time.Now()
	d := spreadDef("a", time.Hour, "sideways")
	d.Normalize()
	if err := d.Validate(now); err == nil || !strings.Contains(err.Error(), "schedule.align") {
		t.Fatalf("bad align accepted: %v", err)
	}
	d = &protocol.TaskDef{ID: "a", Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "* * * * *", Align: protocol.AlignSpread}}
	d.Normalize()
	if err := d.Validate(now); err == nil || !strings.Contains(err.Error(), "interval schedules only") {
		t.Fatalf("align on a cron accepted: %v", err)
	}
}

func TestHashedCronExpansion(t *testing.T) {
	cases := []struct {
		expr  string
		check func(t *testing.T, got string)
	}{
		{"H * * * *", func(t *testing.T, got string) {
			var m int
			if _, err := fmt.Sscanf(got, "%d * * * *", &m); err != nil || m < 0 || m > 59 {
				t.Fatalf("H minute: %q", got)
			}
		}},
		{"H(0-29) H(8-9) * * *", func(t *testing.T, got string) {
			var m, h int
			if _, err := fmt.Sscanf(got, "%d %d * * *", &m, &h); err != nil || m < 0 || m > 29 || h < 8 || h > 9 {
				t.Fatalf("H ranges: %q", got)
			}
		}},
		{"H/15 * * * *", func(t *testing.T, got string) {
			var s, e, st int
			if _, err := fmt.Sscanf(got, "%d-%d/%d * * * *", &s, &e, &st); err != nil || s < 0 || s > 14 || e != 59 || st != 15 {
				t.Fatalf("H/15: %q", got)
			}
		}},
		{"0 H H * * *", func(t *testing.T, got string) { // seconds first
			var m, h int
			if _, err := fmt.Sscanf(got, "0 %d %d * * *", &m, &h); err != nil || h > 23 {
				t.Fatalf("6 fields: %q", got)
			}
		}},
		{"0 0 H * *", func(t *testing.T, got string) {
			var d int
			if _, err := fmt.Sscanf(got, "0 0 %d * *", &d); err != nil || d < 1 || d > 28 {
				t.Fatalf("H day of month must fire every month (1-28): %q", got)
			}
		}},
		{"*/5 * * * MON-THU", func(t *testing.T, got string) { // THU holds an H but is no H form
			if got != "*/5 * * * MON-THU" {
				t.Fatalf("day names changed: %q", got)
			}
		}},
	}
	for _, c := range cases {
		got, err := protocol.ExpandHashed(c.expr, "task-7")
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		c.check(t, got)
		again, _ := protocol.ExpandHashed(c.expr, "task-7")
		if again != got {
			t.Fatalf("%q expanded to %q then %q: not stable", c.expr, got, again)
		}
	}
	// Spread: H picks different minutes for different tasks.
	minutes := map[string]bool{}
	for i := range 1000 {
		got, _ := protocol.ExpandHashed("H * * * *", fmt.Sprintf("task-%d", i))
		minutes[got] = true
	}
	if len(minutes) < 55 {
		t.Fatalf("1000 tasks with H * * * * use only %d minutes", len(minutes))
	}
	for _, bad := range []string{"H(30-70) * * * *", "H(9-3) * * * *", "H/0 * * * *", "H/100 * * * *", "H(1-5 * * * *", "Hx * * * *", "H(a-b) * * * *", "H-5 * * * *", "H H H"} {
		if _, err := protocol.ExpandHashed(bad, "t"); err == nil {
			t.Fatalf("%q accepted", bad)
		}
		d := &protocol.TaskDef{ID: "t", Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
			Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: bad}}
		d.Normalize()
		if err := d.Validate(time.Now()); err == nil || !strings.Contains(err.Error(), "schedule.cron") {
			t.Fatalf("%q: Validate said %v", bad, err)
		}
	}
}

func TestHashedCronPlanUsesTheExpansion(t *testing.T) {
	d := &protocol.TaskDef{ID: "task-9", Title: "t", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
		Schedule: protocol.Schedule{Kind: protocol.ScheduleCron, Cron: "H H * * *"}, Timezone: "Europe/Berlin"}
	d.Normalize()
	if err := d.Validate(time.Now()); err != nil {
		t.Fatal(err)
	}
	plan, err := protocol.NewPlan(d)
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := protocol.ExpandHashed("H H * * *", "task-9")
	if plan.CronExpr() != exp {
		t.Fatalf("plan runs %q, expansion is %q", plan.CronExpr(), exp)
	}
	var m, h int
	fmt.Sscanf(exp, "%d %d", &m, &h)
	loc, _ := time.LoadLocation("Europe/Berlin")
	for _, f := range plan.Preview(time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC), 3) {
		if l := f.In(loc); l.Minute() != m || l.Hour() != h {
			t.Fatalf("fire %s is not at %02d:%02d Berlin time", l, h, m)
		}
	}
}

// TestFireOfALateTimerNamesItsOwnFire: on a loaded machine a timer of a
// one-second interval may go off more than half a second late; it still
// names its own fire, never the next one (whose own timer names it too).
func TestFireOfALateTimerNamesItsOwnFire(t *testing.T) {
	t.Parallel()
	plan, err := protocol.NewPlan(&protocol.TaskDef{Type: protocol.TaskHTTP,
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Second), Align: protocol.AlignEpoch}})
	if err != nil {
		t.Fatal(err)
	}
	fire := time.Date(2030, 1, 1, 10, 40, 41, 0, time.UTC)
	for _, skew := range []time.Duration{-100 * time.Millisecond, -time.Millisecond, 0, 499 * time.Millisecond,
		600 * time.Millisecond, 850 * time.Millisecond} {
		if got := plan.FireOf(fire.Add(skew)); !got.Equal(fire) {
			t.Errorf("FireOf(%s%+v) = %s, want %s", fire.Format(time.TimeOnly), skew, got.Format(time.StampMilli), fire.Format(time.TimeOnly))
		}
	}
	if got := plan.FireOf(fire.Add(time.Second)); !got.Equal(fire.Add(time.Second)) {
		t.Errorf("the next timer names %s", got)
	}
}
