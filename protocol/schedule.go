package protocol

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser accepts five fields, or six with leading seconds, and descriptors like @hourly.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronHorizon is how far ahead a schedule must fire at least once.
const cronHorizon = 5

// ParseCron parses a cron expression with optional seconds, in UTC. It refuses
// what cannot work as written: an @every that is not a whole number of
// seconds, at least one (robfig/cron would silently round it), and an
// expression with no fire in the next five years, such as "0 0 30 2 *".
func ParseCron(expr string) (cron.Schedule, error) {
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, fmt.Errorf("time zone prefixes are not supported; set the task's timezone field instead")
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, err
	}
	switch v := s.(type) {
	case cron.ConstantDelaySchedule:
		every, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(trimmed, "@every")))
		if err != nil {
			return nil, fmt.Errorf("@every needs a duration like 30s or 5m")
		}
		if msg := CheckEvery(every); msg != "" {
			return nil, fmt.Errorf("@every %s", msg)
		}
	case *cron.SpecSchedule:
		v.Location = time.UTC
	}
	now := time.Now().UTC()
	if next := s.Next(now); next.IsZero() || next.After(now.AddDate(cronHorizon, 0, 0)) {
		return nil, fmt.Errorf("never fires in the next %d years", cronHorizon)
	}
	return s, nil
}

// CheckEvery checks an interval: a whole number of seconds from MinInterval
// to MaxInterval. It returns what is wrong, or "".
func CheckEvery(every time.Duration) string {
	switch {
	case every <= 0:
		return "must be more than 0"
	case every < MinInterval:
		return fmt.Sprintf("is shorter than %s: sub-second intervals cannot run as written", MinInterval)
	case every%time.Second != 0:
		return "must be a whole number of seconds"
	case every > MaxInterval:
		return fmt.Sprintf("is longer than %s", MaxInterval)
	}
	return ""
}

// CronHasSeconds reports whether a cron expression has the optional seconds field.
func CronHasSeconds(expr string) bool {
	return !strings.HasPrefix(expr, "@") && len(strings.Fields(expr)) == 6
}

// NextFire is the next time a task's schedule fires after now, if any: the
// master shows it, and it follows the same rules as the worker's runner.
func NextFire(d *TaskDef, now time.Time) (time.Time, bool) {
	return nextFireFunc(d)(now)
}

// nextFireFunc returns NextFire for d with its schedule parsed once, so that
// walking many fires (CountFires) does not parse it at every step.
func nextFireFunc(d *TaskDef) func(now time.Time) (time.Time, bool) {
	none := func(time.Time) (time.Time, bool) { return time.Time{}, false }
	var next func(from, now time.Time) time.Time
	switch d.Schedule.Kind {
	case ScheduleCron:
		loc, err := LoadTimezone(d.Timezone)
		if err != nil {
			return none
		}
		s, err := ParseCronIn(d.Schedule.Cron, loc)
		if err != nil {
			return none
		}
		next = func(from, _ time.Time) time.Time { return s.Next(from.UTC()) }
	case ScheduleInterval:
		every := time.Duration(d.Schedule.Every)
		if every <= 0 {
			return none
		}
		next = func(from, _ time.Time) time.Time { return from.Truncate(every).Add(every) }
	case ScheduleOnce:
		next = func(_, now time.Time) time.Time {
			if d.Schedule.At == nil || !d.Schedule.At.After(now) {
				return time.Time{}
			}
			return *d.Schedule.At
		}
	default:
		return none
	}
	return func(now time.Time) (time.Time, bool) {
		from := now
		if d.StartAt != nil && d.StartAt.After(from) {
			from = *d.StartAt
		}
		n := next(from, now)
		if n.IsZero() || (d.EndAt != nil && n.After(*d.EndAt)) {
			return time.Time{}, false
		}
		return n.UTC(), true
	}
}

// CountFires counts the fires of d strictly after after and at or before
// until, by NextFire's rules (time zone, DST, start and end window), and
// names the first and the last. It stops counting at limit (then more fires
// may follow): a long outage of a frequent task costs bounded work.
func CountFires(d *TaskDef, after, until time.Time, limit int) (n int, first, last time.Time) {
	next := nextFireFunc(d)
	for t := after; n < limit; {
		f, ok := next(t)
		if !ok || f.After(until) || !f.After(t) {
			break
		}
		if n == 0 {
			first = f
		}
		last, t = f, f
		n++
	}
	return n, first, last
}
