package form

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// ScheduleFields are the schedule part of the task form as typed: the task
// form and its live preview read them the same way.
type ScheduleFields struct {
	Kind, Cron, Every, Align, At, StartAt, EndAt, Timezone string
}

// scheduleFields reads the schedule fields of the task form.
func scheduleFields(v url.Values) ScheduleFields {
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	return ScheduleFields{Kind: v.Get("schedule_kind"), Cron: v.Get("schedule_cron"), Every: trim("schedule_every"), Align: trim("schedule_align"),
		At: trim("schedule_at"), StartAt: trim("start_at"), EndAt: trim("end_at"), Timezone: trim("timezone")}
}

// Schedule reads the task form's schedule into d (kind, cron, interval,
// once, start and end, time zone): its times are wall clock times in the
// task's zone, read as UTC while the zone is unknown (Validate names it).
// It returns the zone the times were read in, whether the zone is known, and
// the errors of the values that do not parse.
func Schedule(v url.Values, d *protocol.TaskDef) (loc *time.Location, knownZone bool, fe protocol.FieldErrors) {
	return scheduleInto(scheduleFields(v), d)
}

func scheduleInto(f ScheduleFields, d *protocol.TaskDef) (*time.Location, bool, protocol.FieldErrors) {
	fe := protocol.FieldErrors{}
	d.Timezone = f.Timezone
	d.Schedule = protocol.Schedule{Kind: strings.TrimSpace(f.Kind)}
	loc, err := protocol.LoadTimezone(f.Timezone)
	known := err == nil
	if !known {
		loc = time.UTC
	}
	switch d.Schedule.Kind {
	case protocol.ScheduleCron:
		d.Schedule.Cron = f.Cron
	case protocol.ScheduleInterval:
		if f.Every != "" {
			ev, err := time.ParseDuration(f.Every)
			if err != nil {
				fe["schedule.every"] = fmt.Sprintf("%q is not a duration like 2s, 5m or 1h", f.Every)
			}
			d.Schedule.Every = protocol.Duration(ev)
		}
		d.Schedule.Align = f.Align
	case protocol.ScheduleOnce:
		if d.Schedule.At, err = TimeIn(f.At, loc); err != nil {
			fe["schedule.at"] = err.Error()
		}
	}
	if d.StartAt, err = TimeIn(f.StartAt, loc); err != nil {
		fe["start_at"] = err.Error()
	}
	if d.EndAt, err = TimeIn(f.EndAt, loc); err != nil {
		fe["end_at"] = err.Error()
	}
	return loc, known, fe
}
