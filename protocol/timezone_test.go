package protocol_test

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // as the binary: the same zones on every host

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// mustPlan is d's plan.
func mustPlan(t *testing.T, d *protocol.TaskDef) *protocol.Plan {
	t.Helper()
	p, err := protocol.NewPlan(d)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// fires lists the fires of d from `from` (exclusive) up to `to`, by its
// plan's Next.
func fires(t *testing.T, d *protocol.TaskDef, from, to string) []string {
	t.Helper()
	p := mustPlan(t, d)
	now := mustTime(t, from)
	end := mustTime(t, to)
	var out []string
	for i := 0; i < 100; i++ {
		next, ok := p.Next(now)
		if !ok || next.After(end) {
			return out
		}
		if !next.After(now) {
			t.Fatalf("Next(%s) = %s: not after now", now, next)
		}
		out = append(out, next.Format(time.RFC3339))
		now = next
	}
	t.Fatalf("more than 100 fires from %s to %s", from, to)
	return nil
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func cronDef(expr, tz string) *protocol.TaskDef {
	d := validHTTP()
	d.Schedule = protocol.Schedule{Kind: protocol.ScheduleCron, Cron: expr}
	d.Timezone = tz
	d.Normalize()
	return &d
}

func TestPlanTimezoneDST(t *testing.T) {
	t.Parallel()
	daily := cronDef("30 2 * * *", "Europe/Berlin")
	// Spring-forward, 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30
	// never happens; the job fires once, at the jump (01:00 UTC).
	got := fires(t, daily, "2026-03-27T12:00:00Z", "2026-03-31T12:00:00Z")
	want := []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("spring-forward fires = %v, want %v", got, want)
	}
	// Fall-back, 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30
	// happens twice; the job fires once, at the first (00:30 UTC).
	got = fires(t, daily, "2026-10-23T12:00:00Z", "2026-10-27T12:00:00Z")
	want = []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("fall-back fires = %v, want %v", got, want)
	}
	// Asked during the repeated hour (02:15 CET), the 02:30 of the day has
	// fired already.
	if next, _ := mustPlan(t, daily).Next(mustTime(t, "2026-10-25T01:15:00Z")); !next.Equal(mustTime(t, "2026-10-26T01:30:00Z")) {
		t.Errorf("next fire from the repeated hour = %s, want 2026-10-26T01:30:00Z", next)
	}

	// Hourly jobs follow elapsed time: 23 fires on the short day, 25 on the long one.
	hourly := cronDef("0 * * * *", "Europe/Berlin")
	if n := len(fires(t, hourly, "2026-03-28T22:59:00Z", "2026-03-29T21:59:00Z")); n != 23 {
		t.Errorf("hourly fires on the spring-forward day = %d, want 23", n)
	}
	if n := len(fires(t, hourly, "2026-10-24T21:59:00Z", "2026-10-25T22:59:00Z")); n != 25 {
		t.Errorf("hourly fires on the fall-back day = %d, want 25", n)
	}

	// Outside DST changes, the wall clock of the zone: 09:00 New York is 13:00 UTC in summer.
	ny := cronDef("0 9 * * 1-5", "America/New_York")
	if got := fires(t, ny, "2026-07-03T00:00:00Z", "2026-07-07T00:00:00Z"); strings.Join(got, " ") != "2026-07-03T13:00:00Z 2026-07-06T13:00:00Z" {
		t.Errorf("New York fires = %v", got)
	}
	// UTC, the default, is unchanged.
	utc := cronDef("30 2 * * *", "")
	if utc.Timezone != "UTC" {
		t.Errorf("Normalize left timezone %q, want UTC", utc.Timezone)
	}
	if got := fires(t, utc, "2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z"); strings.Join(got, " ") != "2026-03-29T02:30:00Z 2026-03-30T02:30:00Z" {
		t.Errorf("UTC fires = %v", got)
	}
}

func TestTimezoneValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ tz, cron, field, msg string }{
		{"Mars/Olympus", "0 * * * *", "timezone", "not an IANA time zone"},
		{"Local", "0 * * * *", "timezone", "not allowed"},
		{"UTC", "CRON_TZ=Europe/Berlin 0 * * * *", "schedule.cron", "timezone field"},
		{"Europe/Berlin", "TZ=UTC 0 * * * *", "schedule.cron", "timezone field"},
	} {
		d := cronDef(c.cron, c.tz)
		err := d.Validate(time.Now())
		fe, _ := err.(protocol.FieldErrors)
		if !strings.Contains(fe[c.field], c.msg) {
			t.Errorf("tz %q cron %q: %s = %q, want it to say %q (%v)", c.tz, c.cron, c.field, fe[c.field], c.msg, err)
		}
	}
	if err := cronDef("30 2 * * *", " Asia/Tokyo ").Validate(time.Now()); err != nil {
		t.Errorf("Asia/Tokyo refused: %v", err)
	}
}

// TestTimezoneNamesAreLoadable: the zones the console suggests are bounded,
// start with UTC, hold the common ones and all load.
func TestTimezoneNamesAreLoadable(t *testing.T) {
	t.Parallel()
	names := protocol.TimezoneNames()
	if len(names) < 300 || len(names) > protocol.MaxZoneNames || names[0] != "UTC" {
		t.Fatalf("%d zones, first %q; want 300 to %d, UTC first", len(names), names[0], protocol.MaxZoneNames)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("%s listed twice", n)
		}
		seen[n] = true
		if _, err := protocol.LoadTimezone(n); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	for _, want := range []string{"Europe/Berlin", "America/New_York", "Asia/Shanghai", "Asia/Tokyo", "Australia/Sydney", "America/Sao_Paulo"} {
		if !seen[want] {
			t.Errorf("%s is not suggested", want)
		}
	}
}
