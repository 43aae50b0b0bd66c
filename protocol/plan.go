package protocol

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Plan is a task's schedule read once (cron expression parsed, time zone
// loaded) that answers every question about its fires: the next one, whether
// a time is one, how many lie in a span, a preview. The master (claims,
// misfires, next run), the worker (its gocron job, naming and counting fires)
// and the console's preview all ask it, so they cannot disagree.
//
// The rules: an interval fires at the multiples of its length (time.Truncate,
// so every node names the same instants), shifted by the task's stable phase
// when it is spread (IntervalPhase); a cron schedule, its H forms expanded
// for the task (ExpandHashed), fires in the
// task's time zone with cron's DST rules (see ParseCronIn); a one-time
// schedule fires at its time. A fire is strictly after start_at and at or
// before end_at. The zero Plan never fires.
type Plan struct {
	kind  string
	cron  cron.Schedule // ScheduleCron: read in loc
	every time.Duration // ScheduleInterval
	phase time.Duration // ScheduleInterval: offset of the fires from the multiples of every
	expr  string        // ScheduleCron: the expression, H forms expanded
	at    time.Time     // ScheduleOnce
	start time.Time     // zero: no start_at
	end   time.Time     // zero: no end_at
	loc   *time.Location
}

// NewPlan reads d's schedule, time zone and window. Its errors wrap
// ErrInvalid; Validate says the same in words for each field.
func NewPlan(d *TaskDef) (Plan, error) {
	loc, err := LoadTimezone(d.Timezone)
	if err != nil {
		return Plan{}, fmt.Errorf("%w: timezone %v", ErrInvalid, err)
	}
	var sch cron.Schedule
	var expr string
	switch d.Schedule.Kind {
	case ScheduleCron:
		if expr, err = ExpandHashed(d.Schedule.Cron, d.ID); err != nil {
			return Plan{}, fmt.Errorf("%w: schedule.cron %q: %v", ErrInvalid, d.Schedule.Cron, err)
		}
		if sch, err = ParseCronIn(expr, loc); err != nil {
			return Plan{}, fmt.Errorf("%w: schedule.cron %q: %v", ErrInvalid, d.Schedule.Cron, err)
		}
	case ScheduleInterval:
		if d.Schedule.Every <= 0 {
			return Plan{}, fmt.Errorf("%w: schedule.every must be more than 0", ErrInvalid)
		}
	case ScheduleOnce:
		if d.Schedule.At == nil {
			return Plan{}, fmt.Errorf("%w: schedule.at is required for a one-time schedule", ErrInvalid)
		}
	default:
		return Plan{}, fmt.Errorf("%w: schedule kind %q", ErrInvalid, d.Schedule.Kind)
	}
	return planOf(d, loc, sch, expr), nil
}

// planOf is the plan of d, its zone and its cron schedule (nil unless cron)
// already read and checked: NewPlan, and Validate with what it has parsed.
func planOf(d *TaskDef, loc *time.Location, sch cron.Schedule, expr string) Plan {
	p := Plan{kind: d.Schedule.Kind, cron: sch, expr: expr, every: time.Duration(d.Schedule.Every), loc: loc}
	if p.kind == ScheduleInterval && d.Schedule.Align == AlignSpread {
		p.phase = IntervalPhase(d.ID, p.every)
	}
	if d.Schedule.At != nil {
		p.at = d.Schedule.At.UTC()
	}
	if d.StartAt != nil {
		p.start = *d.StartAt
	}
	if d.EndAt != nil {
		p.end = *d.EndAt
	}
	return p
}

// Location is the time zone the schedule is read in (UTC for a plan that
// names none, and for the zero Plan).
func (p *Plan) Location() *time.Location {
	if p.loc == nil {
		return time.UTC
	}
	return p.loc
}

// Phase is an interval's offset from the multiples of its length (0 unless
// spread).
func (p *Plan) Phase() time.Duration { return p.phase }

// CronExpr is a cron schedule's expression with its H forms expanded: the
// schedule itself, the same for every node ("" for other kinds).
func (p *Plan) CronExpr() string { return p.expr }

// Cron is the parsed cron schedule without the start/end window (nil for
// other kinds), for a scheduler that applies the window itself: the worker
// hands it to gocron, so gocron runs the very schedule the plan names.
func (p *Plan) Cron() cron.Schedule { return p.cron }

// next is the schedule's first point strictly after t, ignoring the window
// (zero: none).
func (p *Plan) next(t time.Time) time.Time {
	switch p.kind {
	case ScheduleCron:
		return p.cron.Next(t.UTC())
	case ScheduleInterval:
		return t.Add(-p.phase).Truncate(p.every).Add(p.every + p.phase)
	case ScheduleOnce:
		if p.at.After(t) {
			return p.at
		}
	}
	return time.Time{}
}

// Next is the first fire strictly after after, in UTC, if any.
func (p *Plan) Next(after time.Time) (time.Time, bool) {
	from := after
	if p.kind != ScheduleOnce && !p.start.IsZero() && p.start.After(from) {
		// A one-time fire is its own time; Validate keeps it in the window.
		from = p.start
	}
	n := p.next(from)
	if n.IsZero() || (!p.end.IsZero() && n.After(p.end)) {
		return time.Time{}, false
	}
	return n.UTC(), true
}

// IsFire reports whether t is a real fire of the schedule: one Next names.
// The master accepts claims of such fires only.
func (p *Plan) IsFire(t time.Time) bool {
	n, ok := p.Next(t.Add(-time.Nanosecond))
	return ok && n.Equal(t)
}

// FireCount is a count of fires in a span: N fires from First to Last. More
// says the count stopped at its limit with fires still to come in the span.
type FireCount struct {
	N           int
	First, Last time.Time
	More        bool
}

// Fires counts the fires strictly after after and at or before until, up to
// limit of them, so that a long outage of a frequent task costs bounded work
// (an interval is counted in constant time).
func (p *Plan) Fires(after, until time.Time, limit int) FireCount {
	var c FireCount
	if limit <= 0 {
		return c
	}
	if p.kind == ScheduleInterval {
		return p.intervalFires(after, until, limit)
	}
	for t := after; ; {
		f, ok := p.Next(t)
		if !ok || f.After(until) || !f.After(t) {
			return c
		}
		if c.N == limit {
			c.More = true
			return c
		}
		if c.N == 0 {
			c.First = f
		}
		c.Last, t = f, f
		c.N++
	}
}

// intervalFires is Fires for an interval, by arithmetic.
func (p *Plan) intervalFires(after, until time.Time, limit int) FireCount {
	lo := after
	if !p.start.IsZero() && p.start.After(lo) {
		lo = p.start
	}
	hi := until
	if !p.end.IsZero() && p.end.Before(hi) {
		hi = p.end
	}
	first := p.next(lo)
	if first.After(hi) {
		return FireCount{}
	}
	last := hi.Add(-p.phase).Truncate(p.every).Add(p.phase)
	total := int64(last.Sub(first)/p.every) + 1
	if total > int64(limit) {
		return FireCount{N: limit, First: first.UTC(), Last: first.Add(time.Duration(limit-1) * p.every).UTC(), More: true}
	}
	return FireCount{N: int(total), First: first.UTC(), Last: last.UTC()}
}

// Preview is the next n fires after from, in order.
func (p *Plan) Preview(from time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		f, ok := p.Next(from)
		if !ok {
			break
		}
		out = append(out, f)
		from = f
	}
	return out
}

// FireOf names the fire that a timer going off at now belongs to: the
// schedule's own time, not the local clock, so that every executor names
// (and claims) the same fire. A timer may go off a little early (up to
// 200 ms, a tenth of an interval) or late: an interval's fire is the last
// point at or before now plus that, so a timer half an interval late on a
// loaded machine still names its own fire, not the next one (which would
// leave its own fire unclaimed and claim the next one twice).
func (p *Plan) FireOf(now time.Time) time.Time {
	switch p.kind {
	case ScheduleOnce:
		return p.at
	case ScheduleInterval:
		early := min(200*time.Millisecond, p.every/10)
		return now.Add(early - p.phase).Truncate(p.every).Add(p.phase).UTC()
	case ScheduleCron:
		// The last schedule point at or before now (plus a little for a timer
		// firing early). Look back 2 s first: it is where the point is unless
		// the run started very late.
		for _, back := range []time.Duration{2 * time.Second, 5 * time.Minute} {
			t := p.cron.Next(now.Add(-back).Truncate(time.Second).Add(-time.Nanosecond))
			last := time.Time{}
			for !t.After(now.Add(200*time.Millisecond)) && !t.IsZero() {
				last = t
				t = p.cron.Next(t)
			}
			if !last.IsZero() {
				return last.UTC()
			}
		}
	}
	return now.Truncate(time.Second).UTC()
}
