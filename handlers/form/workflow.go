package form

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// The workflow form names a step's fields steps[i].name, steps[i].task,
// steps[i].params, steps[i].timeout, and its edges steps[i].after[j].step
// and steps[i].after[j].on: the engine's own names of the fields, so its
// field errors land beside them.
var (
	stepKeyRE = regexp.MustCompile(`^steps\[(\d{1,6})\]\.(name|task|params|timeout)$`)
	edgeKeyRE = regexp.MustCompile(`^steps\[(\d{1,6})\]\.after\[(\d{1,6})\]\.(step|on)$`)
)

// WorkflowAsTyped reads the workflow form as typed, every row kept (the
// blank ones too, for Add step and Add edge), in the order of their
// indices; more rows than a workflow may have are cut.
func WorkflowAsTyped(v url.Values) views.WorkflowFields {
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := views.WorkflowFields{
		Project: trim("project"), Title: v.Get("title"), Key: trim("key"), Version: trim("version"),
		ScheduleKind: trim("schedule_kind"), Cron: v.Get("schedule_cron"), Every: trim("schedule_every"), Align: trim("schedule_align"),
		At: trim("schedule_at"), StartAt: trim("start_at"), EndAt: trim("end_at"), Timezone: trim("timezone"),
		Overlap: trim("overlap"), Misfire: trim("misfire"), Timeout: trim("timeout"), Params: v.Get("params"),
	}
	steps := map[int]*views.StepFields{}
	edges := map[int]map[int]*views.EdgeFields{}
	step := func(i int) *views.StepFields {
		if steps[i] == nil {
			steps[i] = &views.StepFields{}
		}
		return steps[i]
	}
	for k := range v {
		if m := stepKeyRE.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[1])
			s := step(i)
			switch m[2] {
			case "name":
				s.Name = strings.TrimSpace(v.Get(k))
			case "task":
				s.Task = strings.TrimSpace(v.Get(k))
			case "params":
				s.Params = v.Get(k)
			case "timeout":
				s.Timeout = strings.TrimSpace(v.Get(k))
			}
		} else if m := edgeKeyRE.FindStringSubmatch(k); m != nil {
			i, _ := strconv.Atoi(m[1])
			j, _ := strconv.Atoi(m[2])
			step(i)
			if edges[i] == nil {
				edges[i] = map[int]*views.EdgeFields{}
			}
			e := edges[i][j]
			if e == nil {
				e = &views.EdgeFields{}
				edges[i][j] = e
			}
			if m[3] == "step" {
				e.Step = strings.TrimSpace(v.Get(k))
			} else {
				e.On = strings.TrimSpace(v.Get(k))
			}
		}
	}
	for _, i := range sortedKeys(steps) {
		if len(f.Steps) > master.MaxWorkflowSteps {
			break // one too many: the engine says how many a workflow may have
		}
		s := steps[i]
		for _, j := range sortedKeys(edges[i]) {
			if len(s.After) >= master.MaxWorkflowSteps {
				break
			}
			s.After = append(s.After, *edges[i][j])
		}
		f.Steps = append(f.Steps, *s)
	}
	return f
}

func sortedKeys[T any](m map[int]T) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Workflow reads the workflow form: the values as typed, its blank edges
// and steps left out (so the engine's step and edge numbers are the form's
// again), the engine's input and the errors of the fields that do not
// parse. The engine checks the rest.
func Workflow(v url.Values) (views.WorkflowFields, master.WorkflowInput, protocol.FieldErrors) {
	f := WorkflowAsTyped(v)
	for i := range f.Steps {
		f.Steps[i].After = slices.DeleteFunc(f.Steps[i].After, func(e views.EdgeFields) bool { return e.Step == "" })
	}
	f.Steps = slices.DeleteFunc(f.Steps, func(s views.StepFields) bool {
		return s.Name == "" && s.Task == "" && strings.TrimSpace(s.Params) == "" && s.Timeout == "" && len(s.After) == 0
	})
	in := master.WorkflowInput{Project: f.Project, WorkflowDef: master.WorkflowDef{
		Title: f.Title, Key: f.Key, Overlap: f.Overlap, Misfire: f.Misfire}}
	var td protocol.TaskDef
	_, _, fe := scheduleInto(ScheduleFields{Kind: f.ScheduleKind, Cron: f.Cron, Every: f.Every, Align: f.Align, At: f.At,
		StartAt: f.StartAt, EndAt: f.EndAt, Timezone: f.Timezone}, &td)
	in.Timezone = td.Timezone
	if kind := td.Schedule.Kind; kind != "" && kind != views.ScheduleManual {
		sched := td.Schedule
		in.Schedule, in.StartAt, in.EndAt = &sched, td.StartAt, td.EndAt
	} else {
		// Run by hand: the window's fields are hidden, and what they
		// still hold is not the workflow's.
		delete(fe, "start_at")
		delete(fe, "end_at")
	}
	if n, err := strconv.Atoi(f.Version); err == nil && n > 0 {
		in.Version = n // hidden: a version that does not read is none (no check)
	}
	var err error
	in.Timeout = parseTimeout(fe, "timeout", f.Timeout)
	if in.Params, err = Pairs(f.Params, "="); err != nil {
		fe["params"] = err.Error()
	}
	if len(f.Steps) > master.MaxWorkflowSteps {
		fe["steps"] = fmt.Sprintf("%d steps or more: at most %d", len(f.Steps), master.MaxWorkflowSteps)
	}
	for i, s := range f.Steps {
		at := fmt.Sprintf("steps[%d]", i)
		step := master.WorkflowStep{Name: s.Name, Task: s.Task, Timeout: parseTimeout(fe, at+".timeout", s.Timeout)}
		if step.Params, err = Pairs(s.Params, "="); err != nil {
			fe[at+".params"] = err.Error()
		}
		for _, e := range s.After {
			step.After = append(step.After, master.StepEdge{Step: e.Step, On: e.On})
		}
		in.Steps = append(in.Steps, step)
	}
	return f, in, fe
}

// parseTimeout reads a duration field ("" is none) and files what does not
// parse under field.
func parseTimeout(fe protocol.FieldErrors, field, typed string) protocol.Duration {
	if typed == "" {
		return 0
	}
	d, err := time.ParseDuration(typed)
	if err != nil {
		fe[field] = fmt.Sprintf("%q is not a duration like 30s or 5m", typed)
		return 0
	}
	return protocol.Duration(d)
}

// WorkflowFieldsOf fills the workflow form with a stored workflow; its
// times are in its zone.
func WorkflowFieldsOf(w *master.Workflow) views.WorkflowFields {
	loc, err := protocol.LoadTimezone(w.Timezone)
	if err != nil {
		loc = time.UTC
	}
	f := views.WorkflowFields{Project: w.Project, Title: w.Title, Key: w.Key, Version: strconv.Itoa(w.Version),
		ScheduleKind: views.ScheduleManual, Timezone: w.Timezone, Overlap: w.Overlap, Misfire: w.Misfire,
		StartAt: FormatTimeIn(w.StartAt, loc), EndAt: FormatTimeIn(w.EndAt, loc), Params: JoinPairs(w.Params, "=")}
	if w.Timeout > 0 {
		f.Timeout = duration(time.Duration(w.Timeout))
	}
	if s := w.Schedule; s != nil && s.Kind != "" {
		f.ScheduleKind, f.Cron, f.Align = s.Kind, s.Cron, s.Align
		if s.Every > 0 {
			f.Every = duration(time.Duration(s.Every))
		}
		f.At = FormatTimeIn(s.At, loc)
	}
	for _, s := range w.Steps {
		row := views.StepFields{Name: s.Name, Task: s.Task, Params: JoinPairs(s.Params, "=")}
		if s.Timeout > 0 {
			row.Timeout = duration(time.Duration(s.Timeout))
		}
		for _, e := range s.After {
			row.After = append(row.After, views.EdgeFields{Step: e.Step, On: e.On})
		}
		f.Steps = append(f.Steps, row)
	}
	return f
}

// ApplyWorkflowOp changes the typed form as op (views.OpAddStep and the
// others) says and returns the id of
// the control where the change is (it takes the focus); ok is false for an
// op that is none of the form's (the form is then saved).
func ApplyWorkflowOp(f *views.WorkflowFields, op string) (focus string, ok bool) {
	name, rest, _ := strings.Cut(op, ":")
	var idx []int
	for _, p := range strings.Split(rest, ":") {
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return "", false
		}
		idx = append(idx, n)
	}
	stepAt := func() (int, bool) {
		if len(idx) == 0 {
			return 0, false
		}
		return idx[0], idx[0] < len(f.Steps)
	}
	switch {
	case name == views.OpProject && len(idx) == 0:
		return "project", true
	case name == views.OpAddStep && len(idx) == 0:
		if len(f.Steps) >= master.MaxWorkflowSteps {
			return "add-step", true
		}
		f.Steps = append(f.Steps, views.StepFields{})
		return views.StepFieldID(len(f.Steps)-1, "name"), true
	case name == views.OpRemoveStep && len(idx) == 1:
		i, in := stepAt()
		if in {
			f.Steps = slices.Delete(f.Steps, i, i+1)
		}
		if len(f.Steps) == 0 {
			f.Steps = append(f.Steps, views.StepFields{})
		}
		return "add-step", true
	case name == views.OpAddEdge && len(idx) == 1:
		i, in := stepAt()
		if !in {
			return "add-step", true
		}
		s := &f.Steps[i]
		if len(s.After) < master.MaxWorkflowSteps {
			s.After = append(s.After, views.EdgeFields{On: master.OnSuccess})
		}
		return views.EdgeFieldID(i, len(s.After)-1, "step"), true
	case name == views.OpRemoveEdge && len(idx) == 2:
		i, in := stepAt()
		if !in {
			return "add-step", true
		}
		s := &f.Steps[i]
		if j := idx[1]; j < len(s.After) {
			s.After = slices.Delete(s.After, j, j+1)
		}
		return views.StepFieldID(i, "add-edge"), true
	}
	return "", false
}

// Backfill reads the backfill form of a workflow's page: the window's ends
// as wall clock times in loc (the workflow's zone).
func Backfill(v url.Values, loc *time.Location) (views.BackfillFields, master.BackfillInput, protocol.FieldErrors) {
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := views.BackfillFields{From: trim("from"), To: trim("to"), MaxConcurrent: trim("max_concurrent"), Order: trim("order"),
		Params: v.Get("params")}
	fe := protocol.FieldErrors{}
	in := master.BackfillInput{Order: f.Order}
	if t, err := TimeIn(f.From, loc); err != nil {
		fe["from"] = err.Error()
	} else if t != nil {
		in.From = *t
	}
	if t, err := TimeIn(f.To, loc); err != nil {
		fe["to"] = err.Error()
	} else if t != nil {
		in.To = *t
	}
	if f.MaxConcurrent != "" {
		n, err := strconv.Atoi(f.MaxConcurrent)
		if err != nil {
			fe["max_concurrent"] = fmt.Sprintf("must be a whole number from 1 to %d", master.MaxBackfillConcurrency)
		}
		in.MaxConcurrent = n
	}
	var err error
	if in.Params, err = Pairs(f.Params, "="); err != nil {
		fe["params"] = err.Error()
	}
	return f, in, fe
}
