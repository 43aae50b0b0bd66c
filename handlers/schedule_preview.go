package handlers

import (
	"github.com/schedulemaster-go/schedulemaster/locale"

	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	// Note says how the task's own offset places the fires: a spread
	// interval's phase, a cron's H forms expanded; or, without a task id,
	// that they are picked when the task is saved (Fires is then empty).
	Note string `json:"note,omitempty"`
	// Cron is the cron expression with its H forms expanded for the task.
	Cron string `json:"cron,omitempty"`
	// Phase is a spread interval's offset from the multiples of its length.
	Phase string `json:"phase,omitempty"`
}

// preview is what a schedule preview shows.
type preview struct {
	fires []time.Time
	note  string
	cron  string // expanded H forms
	phase time.Duration
}

// previewFires computes the next n fires of a schedule after now, by the
// rules the worker runs (its protocol.Plan), or the field errors saying what
// is wrong: the same words as saving the task would give. An interval with
// no alignment spreads, as a new task does. A spread interval or a cron with
// H places its fires by the task's id: without one (a task not saved yet)
// the preview says so instead of showing times the task will not have.
// Its note is in lc's language (the API's is English).
func previewFires(lc *locale.Localizer, d protocol.TaskDef, n int, now time.Time) (preview, protocol.FieldErrors) {
	d.Normalize()
	if d.Schedule.Kind == protocol.ScheduleInterval && d.Schedule.Align == "" {
		d.Schedule.Align = protocol.AlignSpread
	}
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
		return preview{}, fe
	}
	plan, err := protocol.NewPlan(&d)
	if err != nil {
		// Validate accepted the schedule, so it reads; say so if not.
		return preview{}, protocol.FieldErrors{"schedule.kind": err.Error()}
	}
	// An interval of a second has no room to spread.
	spread := d.Schedule.Kind == protocol.ScheduleInterval && d.Schedule.Align == protocol.AlignSpread &&
		time.Duration(d.Schedule.Every) > time.Second
	hashed := d.Schedule.Kind == protocol.ScheduleCron && protocol.HasHashed(d.Schedule.Cron)
	every := lc.Duration(time.Duration(d.Schedule.Every))
	switch {
	case d.ID == "" && spread:
		return preview{note: lc.T("PreviewSpreadUnsaved", "Every", every)}, nil
	case d.ID == "" && hashed:
		return preview{note: lc.T("PreviewHashedUnsaved")}, nil
	}
	out := preview{fires: plan.Preview(now, n)}
	switch {
	case d.Schedule.Kind == protocol.ScheduleInterval && d.Schedule.Align == protocol.AlignSpread:
		out.phase = plan.Phase()
		out.note = lc.T("PreviewSpread", "Phase", lc.Duration(plan.Phase()), "Every", every)
	case hashed:
		out.cron = plan.CronExpr()
		out.note = lc.T("PreviewHashed", "Cron", plan.CronExpr())
	}
	return out, nil
}

// previewDef is a definition holding only a schedule, so Validate speaks
// about the schedule alone; id is the task's, if it has one (its spread and
// H forms depend on it).
func previewDef(kind, tz, id string) protocol.TaskDef {
	return protocol.TaskDef{ID: previewID(id), Title: "preview", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
		Schedule: protocol.Schedule{Kind: strings.TrimSpace(kind)}, Timezone: tz}
}

// previewID is a task id given to a preview, or "" when it is none: a
// preview computes with it, never looks it up.
func previewID(id string) string {
	id = strings.TrimSpace(id)
	if len(id) > 64 || !utf8.ValidString(id) || strings.ContainsAny(id, "\r\n\x00") {
		return ""
	}
	return id
}

// apiSchedulePreview answers the next fires of a schedule:
// ?kind=cron|interval|once&cron=&every=&align=spread|epoch&at=(RFC 3339)&tz=&id=&n=5.
// id is the task's (a spread interval and H forms depend on it).
func (s *server) apiSchedulePreview(c *gin.Context) {
	fe := protocol.FieldErrors{}
	d := previewDef(c.Query("kind"), c.Query("tz"), c.Query("id"))
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
		d.Schedule.Align = c.Query("align")
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
		var pv preview
		if pv, fe = previewFires(locale.New(locale.EN, nil), d, n, time.Now()); len(fe) == 0 {
			out := SchedulePreview{Fires: make([]string, 0, len(pv.fires)), Note: pv.note, Cron: pv.cron}
			if pv.phase > 0 {
				out.Phase = pv.phase.String()
			}
			for _, f := range pv.fires {
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
	d := previewDef("", "", q.Get("id"))
	loc, known, fe := form.Schedule(q, &d)
	badZone := !known
	vm := views.SchedulePreviewVM{Zone: loc.String(), ZoneLabel: loc.String()}
	if badZone {
		vm.ZoneLabel = "UTC (“" + tz + "” is no known time zone)"
	}
	var pv preview
	if len(fe) == 0 {
		pv, fe = previewFires(lc(c), d, previewDefault, time.Now())
		vm.Note = pv.note
	}
	for k, v := range fe {
		vm.Errors = append(vm.Errors, views.TaskFormSpec.Said(c.Request.Context(), k, v))
	}
	// A fresh form has no schedule yet: invite, do not scold.
	own := map[string]string{protocol.ScheduleCron: "cron", protocol.ScheduleInterval: "every", protocol.ScheduleOnce: "at"}
	if f, ok := own[d.Schedule.Kind]; ok && len(fe) == 1 && fe["schedule."+f] != "" && strings.TrimSpace(c.Query("schedule_"+f)) == "" {
		vm.Blank = true
	}
	sort.Strings(vm.Errors)
	for _, f := range pv.fires {
		vm.Fires = append(vm.Fires, views.PreviewFire{
			Local: lc(c).Weekday(f.In(loc).Weekday()) + " " + f.In(loc).Format("2006-01-02 15:04:05 MST"), UTC: f.UTC().Format(time.RFC3339)})
	}
	s.render(c, http.StatusOK, views.SchedulePreview(vm))
}
