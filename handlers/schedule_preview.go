package handlers

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Preview bounds: how many fires one may ask for.
const (
	previewDefault = 5
	previewMax     = 50
)

// SchedulePreview is the answer of GET /api/v1/schedules/preview.
type SchedulePreview struct {
	Fires []string `json:"fires"`
}

// previewFires computes the next n fires of a schedule after now, by the
// rules the worker runs (its protocol.Plan), or the field errors saying what
// is wrong: the same words as saving the task would give.
func previewFires(d protocol.TaskDef, n int, now time.Time) ([]time.Time, protocol.FieldErrors) {
	d.Normalize()
	fe := protocol.FieldErrors{}
	if err := d.Validate(now); err != nil {
		all, _ := err.(protocol.FieldErrors)
		for k, v := range all {
			// Only what the schedule is made of: the preview has no title or URL.
			if strings.HasPrefix(k, "schedule.") || k == "timezone" || k == "start_at" || k == "end_at" {
				fe[k] = v
			}
		}
	}
	if len(fe) > 0 {
		return nil, fe
	}
	plan, err := protocol.NewPlan(&d)
	if err != nil {
		// Validate accepted the schedule, so it reads; say so if not.
		return nil, protocol.FieldErrors{"schedule.kind": err.Error()}
	}
	return plan.Preview(now, n), nil
}

// previewDef is a definition holding only a schedule, so Validate speaks
// about the schedule alone.
func previewDef(kind, tz string) protocol.TaskDef {
	return protocol.TaskDef{Title: "preview", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
		Schedule: protocol.Schedule{Kind: strings.TrimSpace(kind)}, Timezone: tz}
}

// apiSchedulePreview answers the next fires of a schedule:
// ?kind=cron|interval|once&cron=&every=&at=(RFC 3339)&tz=&n=5.
func (s *server) apiSchedulePreview(c *gin.Context) {
	fe := protocol.FieldErrors{}
	d := previewDef(c.Query("kind"), c.Query("tz"))
	n := previewDefault
	if v := strings.TrimSpace(c.Query("n")); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > previewMax {
			fe["n"] = fmt.Sprintf("%q is not a whole number from 1 to %d", v, previewMax)
		}
	}
	switch d.Schedule.Kind {
	case protocol.ScheduleCron:
		d.Schedule.Cron = c.Query("cron")
	case protocol.ScheduleInterval:
		if v := strings.TrimSpace(c.Query("every")); v != "" {
			ev, err := time.ParseDuration(v)
			if err != nil {
				fe["schedule.every"] = fmt.Sprintf("%q is not a duration like 2s, 5m or 1h", v)
			}
			d.Schedule.Every = protocol.Duration(ev)
		}
	case protocol.ScheduleOnce:
		if v := strings.TrimSpace(c.Query("at")); v != "" {
			at, err := time.Parse(time.RFC3339, v)
			if err != nil {
				fe["schedule.at"] = fmt.Sprintf("%q is not an RFC 3339 time like 2030-01-02T15:04:05Z", v)
			}
			d.Schedule.At = &at
		}
	}
	if len(fe) == 0 {
		var fires []time.Time
		if fires, fe = previewFires(d, n, time.Now()); len(fe) == 0 {
			out := SchedulePreview{Fires: make([]string, 0, len(fires))}
			for _, f := range fires {
				out.Fires = append(out.Fires, f.UTC().Format(time.RFC3339))
			}
			c.JSON(http.StatusOK, out)
			return
		}
	}
	c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": fe.Error(), "fields": fe})
}

// schedulePreview renders the task form's preview of the next fires, read
// from the form's own fields (times in the form's time zone) as it is typed in.
func (s *server) schedulePreview(c *gin.Context) {
	q := c.Request.URL.Query()
	tz := strings.TrimSpace(q.Get("timezone"))
	d := previewDef("", "")
	loc, known, fe := form.Schedule(q, &d)
	badZone := !known
	vm := views.SchedulePreviewVM{Zone: loc.String(), ZoneLabel: loc.String()}
	if badZone {
		vm.ZoneLabel = "UTC (“" + tz + "” is no known time zone)"
	}
	var fires []time.Time
	if len(fe) == 0 {
		fires, fe = previewFires(d, previewDefault, time.Now())
	}
	for k, v := range fe {
		vm.Errors = append(vm.Errors, k+": "+views.Refusal(c.Request.Context(), v))
	}
	// A fresh form has no schedule yet: invite, do not scold.
	own := map[string]string{protocol.ScheduleCron: "cron", protocol.ScheduleInterval: "every", protocol.ScheduleOnce: "at"}
	if f, ok := own[d.Schedule.Kind]; ok && len(fe) == 1 && fe["schedule."+f] != "" && strings.TrimSpace(c.Query("schedule_"+f)) == "" {
		vm.Blank = true
	}
	sort.Strings(vm.Errors)
	for _, f := range fires {
		vm.Fires = append(vm.Fires, views.PreviewFire{
			Local: lc(c).Weekday(f.In(loc).Weekday()) + " " + f.In(loc).Format("2006-01-02 15:04:05 MST"), UTC: f.UTC().Format(time.RFC3339)})
	}
	s.render(c, http.StatusOK, views.SchedulePreview(vm))
}
