package protocol

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultTimezone is the time zone of a task that names none.
const DefaultTimezone = "UTC"

// LoadTimezone resolves a task's IANA time zone name ("" is UTC). It refuses
// "Local", which would make a schedule depend on the host it runs on.
func LoadTimezone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "Local") {
		return nil, fmt.Errorf("%q is not allowed: name an IANA zone like Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone like Europe/Berlin or America/New_York", name)
	}
	return loc, nil
}

// ParseCronIn parses a cron expression like ParseCron, read in the time zone
// loc, with cron's DST rules (see wallSchedule).
func ParseCronIn(expr string, loc *time.Location) (cron.Schedule, error) {
	s, err := ParseCron(expr)
	if err != nil || loc == nil || loc == time.UTC {
		return s, err
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return s, nil // @every: multiples of an interval, no zone
	}
	if spec.Hour&allHours == allHours {
		// Hourly or more often: follow elapsed time, as Vixie cron does, so
		// nothing is lost when an hour is skipped and the repeated hour runs
		// again, like any other hour.
		in := *spec
		in.Location = loc
		return &in, nil
	}
	return &wallSchedule{spec: spec, loc: loc}, nil
}

// allHours is the Hour bitmask of a schedule that fires every hour.
const allHours = 1<<24 - 1

// wallSchedule is a schedule at given hours of the wall clock of loc, with
// Vixie cron's DST rules: a time skipped by spring-forward (02:30 when clocks
// jump from 02:00 to 03:00) fires once at the transition (03:00), and a time
// repeated by fall-back fires once, at its first occurrence.
type wallSchedule struct {
	spec *cron.SpecSchedule // Location UTC: it walks wall clock times
	loc  *time.Location
}

// Next is the first fire strictly after t.
func (w *wallSchedule) Next(t time.Time) time.Time {
	// The wall clock of t, as a UTC time, so spec steps through wall times.
	wall := wallOf(t.In(w.loc))
	for i := 0; i < 1000; i++ {
		wall = w.spec.Next(wall)
		if wall.IsZero() {
			return wall
		}
		at := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, w.loc)
		if l := at.In(w.loc); !sameWall(l, wall) {
			// Skipped by spring-forward: fire at the transition, when the
			// zone that skips it begins.
			start, end := at.ZoneBounds()
			if wallOf(l).Before(wall) {
				at = end
			} else {
				at = start
			}
		} else if start, _ := at.ZoneBounds(); !start.IsZero() {
			_, off := at.Zone()
			if _, prev := start.Add(-time.Second).Zone(); prev > off {
				// Fall-back: the first of the two occurrences.
				if earlier := at.Add(-time.Duration(prev-off) * time.Second); sameWall(earlier.In(w.loc), wall) {
					at = earlier
				}
			}
		}
		if at.After(t) {
			return at
		}
		// Its first occurrence is at or before t (t is in the repeated hour):
		// this wall time has fired already.
	}
	return time.Time{}
}

// wallOf is the wall clock reading of t, as a UTC time.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// sameWall reports whether t reads the wall clock time w (to the second).
func sameWall(t, w time.Time) bool {
	return wallOf(t).Truncate(time.Second).Equal(w.Truncate(time.Second))
}
