package protocol

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser accepts five fields, or six with leading seconds, and descriptors like @hourly.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronHorizon is how far ahead a schedule must fire at least once.
const cronHorizon = 5

// ParseCron parses a cron expression with optional seconds, in UTC; @every
// fires at the multiples of its interval, like an interval schedule. It refuses
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
		// The parser's words ("end of range (61) above maximum (59): 61")
		// name no field; say which one and why, in a sentence.
		if msg := cronSentence(expr); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("%q is not a valid cron expression: %v", expr, err)
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
		// At the multiples of the interval, as an interval schedule: robfig's
		// own counts from each node's last run, so no two executors (nor the
		// master's claim check) would name the same fires.
		s = everySchedule{every}
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

// everySchedule is a cron "@every": the multiples of every (time.Truncate),
// the instants an interval schedule of that length fires at.
type everySchedule struct{ every time.Duration }

// Next is the first multiple of every strictly after t.
func (e everySchedule) Next(t time.Time) time.Time { return t.Truncate(e.every).Add(e.every) }
