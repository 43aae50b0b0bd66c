package protocol_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // as the binary: the same zones on every host

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// planZones are the zones the property test reads schedules in: some with
// no DST, some with hour-long DST changes, one with a half-hour change
// (Lord Howe) and one with a half-hour offset (Kolkata).
var planZones = []string{"", "UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "America/Sao_Paulo", "Pacific/Chatham"}

// planAround are instants near DST changes of those zones, where the
// property test starts its spans.
var planAround = []string{
	"2026-03-08T06:30:00Z", // New York spring-forward
	"2026-11-01T05:30:00Z", // New York fall-back
	"2026-03-29T00:30:00Z", // Berlin spring-forward
	"2026-10-25T00:30:00Z", // Berlin fall-back
	"2026-04-04T14:30:00Z", // Lord Howe fall-back (half an hour)
	"2026-10-03T15:30:00Z", // Lord Howe spring-forward (half an hour)
	"2026-04-04T13:30:00Z", // Chatham fall-back
	"2026-09-26T13:30:00Z", // Chatham spring-forward
	"2026-06-15T12:00:00Z", // no change anywhere
}

// randomPlanDef is a random schedule with a random zone and window around
// base.
func randomPlanDef(r *rand.Rand, base time.Time) protocol.TaskDef {
	pick := func(s ...string) string { return s[r.Intn(len(s))] }
	d := protocol.TaskDef{Timezone: planZones[r.Intn(len(planZones))]}
	switch r.Intn(4) {
	case 0, 1:
		expr := fmt.Sprintf("%s %s %s %s %s",
			pick("*", "*/5", "0", "30", "15,45", "0-10/3", "59"),
			pick("*", "*", "2", "1-3", "*/6", "0,12", "2,3", "1", "0"),
			pick("*", "*", "*", "1", "15", "*/2", "28-31"),
			pick("*", "*", "*", "3,4,9,10,11", "*/3"),
			pick("*", "*", "0", "1-5", "6"))
		if r.Intn(2) == 0 {
			expr = pick("*", "*/15", "0", "30", "5,10", "*/7") + " " + expr
		}
		if r.Intn(8) == 0 {
			expr = pick("@hourly", "@daily", "@every 90s", "@every 1h", "@weekly", "@every 7s", "@midnight")
		}
		d.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: expr}
	case 2:
		every := []time.Duration{time.Second, 7 * time.Second, time.Minute, 90 * time.Second, time.Hour, 25 * time.Hour,
			time.Duration(1+r.Intn(100_000)) * time.Second}[r.Intn(7)]
		d.Schedule = protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(every)}
	default:
		at := base.Add(time.Duration(r.Int63n(int64(48 * time.Hour)))).Truncate(time.Second)
		if r.Intn(2) == 0 {
			at = at.Add(time.Duration(r.Intn(1000)) * time.Millisecond)
		}
		d.Schedule = protocol.Schedule{Kind: protocol.ScheduleOnce, At: &at}
	}
	if r.Intn(3) == 0 {
		start := base.Add(time.Duration(r.Int63n(int64(24*time.Hour))) - 2*time.Hour)
		if r.Intn(2) == 0 {
			start = start.Truncate(time.Minute) // on a fire of many schedules: start_at itself is not a fire
		}
		if d.Schedule.Kind != protocol.ScheduleOnce || d.Schedule.At.After(start) { // else Validate refuses it
			d.StartAt = &start
		}
	}
	if r.Intn(3) == 0 {
		end := base.Add(time.Duration(r.Int63n(int64(72 * time.Hour))))
		if r.Intn(2) == 0 {
			end = end.Truncate(time.Hour) // on a fire of many schedules: end_at itself is one
		}
		d.EndAt = &end
	}
	return d
}

// TestPlanProperties checks, over random schedules, zones (DST changes
// included) and spans, that what a Plan lists agrees with what it accepts:
// every fire Preview and Fires list is one IsFire accepts, the list strictly
// increases, Next of each fire is the following one, and the times between
// two fires are none.
func TestPlanProperties(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewSource(seed))
	cases, checked := 2500, 0
	for i := 0; i < cases; i++ {
		base, err := time.Parse(time.RFC3339, planAround[r.Intn(len(planAround))])
		if err != nil {
			t.Fatal(err)
		}
		base = base.Add(time.Duration(r.Int63n(int64(6*time.Hour))) - 3*time.Hour)
		d := randomPlanDef(r, base)
		p, err := protocol.NewPlan(&d)
		if err != nil {
			t.Fatalf("seed %d: NewPlan(%+v): %v", seed, d.Schedule, err)
		}
		where := fmt.Sprintf("seed %d case %d: %s %q every %s at %v zone %q start %v end %v, from %s", seed, i,
			d.Schedule.Kind, d.Schedule.Cron, time.Duration(d.Schedule.Every), d.Schedule.At, d.Timezone, d.StartAt, d.EndAt, base)
		n := 1 + r.Intn(30)
		fires := p.Preview(base, n)
		if len(fires) > n {
			t.Fatalf("%s: Preview of %d listed %d", where, n, len(fires))
		}
		if len(fires) > 0 {
			checked++
		}
		prev := base
		for k, f := range fires {
			if !f.After(prev) {
				t.Fatalf("%s: fire %d %s is not after %s", where, k, f, prev)
			}
			if !p.IsFire(f) {
				t.Fatalf("%s: listed fire %s is not IsFire", where, f)
			}
			if next, ok := p.Next(prev); !ok || !next.Equal(f) {
				t.Fatalf("%s: Next(%s) = %s %v, want the listed %s", where, prev, next, ok, f)
			}
			if d.StartAt != nil && !f.After(*d.StartAt) || d.EndAt != nil && f.After(*d.EndAt) {
				t.Fatalf("%s: fire %s outside the window", where, f)
			}
			// Times strictly between two fires are none, and lead to the later.
			if gap := f.Sub(prev); gap > time.Nanosecond {
				for _, t0 := range []time.Time{prev.Add(time.Nanosecond), prev.Add(time.Duration(r.Int63n(int64(gap-1))) + 1), f.Add(-time.Nanosecond), f.Add(-time.Second)} {
					if !t0.After(prev) || !t0.Before(f) {
						continue
					}
					if p.IsFire(t0) {
						t.Fatalf("%s: %s between the fires %s and %s is IsFire", where, t0, prev, f)
					}
					if next, ok := p.Next(t0); !ok || !next.Equal(f) {
						t.Fatalf("%s: Next(%s) = %s %v, want %s", where, t0, next, ok, f)
					}
				}
			}
			prev = f
		}
		if len(fires) == n {
			// A second off the last fire (cron and interval fires are whole
			// seconds) is none unless it is the next fire.
			last := fires[len(fires)-1]
			next, ok := p.Next(last)
			if off := last.Add(time.Second); (!ok || next.After(off)) && p.IsFire(off) {
				t.Fatalf("%s: %s, a second after the fire %s, is IsFire", where, off, last)
			}
		} else if next, ok := p.Next(prev); ok {
			t.Fatalf("%s: Preview stopped at %d fires but Next(%s) = %s", where, len(fires), prev, next)
		}

		// Fires counts the same fires, and says when it stopped early.
		until := base.Add(time.Duration(r.Int63n(int64(72 * time.Hour))))
		want := 0
		for _, f := range fires {
			if !f.After(until) {
				want++
			}
		}
		if want == len(fires) && len(fires) == n {
			continue // more may lie before until than Preview listed
		}
		for _, limit := range []int{want, want + 1 + r.Intn(5), max(want-1, 1)} {
			c := p.Fires(base, until, limit)
			wantN := min(want, limit)
			if limit == 0 {
				wantN = 0
			}
			if c.N != wantN || c.More != (want > limit && limit > 0) {
				t.Fatalf("%s: Fires(.., %s, %d) = %d more %v, want %d of %d", where, until, limit, c.N, c.More, wantN, want)
			}
			if c.N > 0 && (!c.First.Equal(fires[0]) || !c.Last.Equal(fires[c.N-1])) {
				t.Fatalf("%s: Fires(.., %s, %d) from %s to %s, want %s to %s", where, until, limit, c.First, c.Last, fires[0], fires[c.N-1])
			}
		}
	}
	if checked < cases/2 {
		t.Fatalf("only %d of %d cases had a fire: the generator is too narrow", checked, cases)
	}
}

// TestPlanSecondOffAFire: a second (and a nanosecond) off a cron or
// interval fire is no fire, the claim check's question.
func TestPlanSecondOffAFire(t *testing.T) {
	t.Parallel()
	for _, d := range []*protocol.TaskDef{
		cronDef("*/5 * * * * *", "Europe/Berlin"),
		cronDef("30 2 * * *", "America/New_York"),
		cronDef("0 * * * *", "Australia/Lord_Howe"),
	} {
		p := mustPlan(t, d)
		for _, f := range p.Preview(mustTime(t, "2026-03-08T00:00:00Z"), 30) {
			for _, off := range []time.Duration{-time.Second, -time.Nanosecond, time.Nanosecond, time.Second} {
				if p.IsFire(f.Add(off)) {
					t.Fatalf("%s: %s, %s off the fire %s, is IsFire", d.Schedule.Cron, f.Add(off), off, f)
				}
			}
		}
	}
	iv := protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Minute)}}
	p := mustPlan(t, &iv)
	f := mustTime(t, "2026-03-08T07:00:00Z")
	if !p.IsFire(f) || p.IsFire(f.Add(time.Second)) || p.IsFire(f.Add(-time.Second)) {
		t.Fatalf("every minute: IsFire(%s) %v, a second later %v, before %v", f, p.IsFire(f), p.IsFire(f.Add(time.Second)), p.IsFire(f.Add(-time.Second)))
	}
}

// A cron @every fires at the multiples of its interval, as an interval
// schedule does: every executor, and the master's claim check, name the
// same fires (robfig's own @every counts from each node's last run).
func TestPlanCronEveryIsAnInterval(t *testing.T) {
	t.Parallel()
	every := cronDef("@every 90s", "Europe/Berlin")
	iv := protocol.TaskDef{Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(90 * time.Second)}}
	from := mustTime(t, "2026-03-29T00:59:59Z")
	got, want := mustPlan(t, every).Preview(from, 10), mustPlan(t, &iv).Preview(from, 10)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("@every 90s fires %v, want the interval's %v", got, want)
	}
	if p := mustPlan(t, every); !p.IsFire(want[3]) {
		t.Fatalf("%s, a multiple of 90s, is no fire of @every 90s", want[3])
	}
}

// Validate refuses a cron task whose only fire in its window is at start_at:
// a fire is strictly after start_at, so it would never fire.
func TestValidateCronWindowIsThePlans(t *testing.T) {
	t.Parallel()
	noon := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 2).Add(12 * time.Hour)
	d := cronDef("0 12 * * *", "UTC")
	start, end := noon, noon.Add(30*time.Minute)
	d.StartAt, d.EndAt = &start, &end
	fe, _ := d.Validate(time.Now()).(protocol.FieldErrors)
	if !strings.Contains(fe["schedule.cron"], "never fires") {
		t.Fatalf("start_at on the only fire: %v, want schedule.cron never fires", fe)
	}
	start = noon.Add(-time.Second)
	if err := d.Validate(time.Now()); err != nil {
		t.Fatalf("start_at a second before the fire: %v", err)
	}
	if f, ok := mustPlan(t, d).Next(time.Now()); !ok || !f.Equal(noon) {
		t.Fatalf("Next = %s %v, want %s", f, ok, noon)
	}
}
