package master

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Limits of a workflow definition.
const (
	MaxWorkflowSteps = 500
	// maxStepOutput bounds what a step passes to its children: the end of
	// its output.
	maxStepOutput = 4096
)

// Conditions on a workflow edge: the parent's outcome that lets the child
// run.
const (
	OnSuccess = "success"
	OnFailure = "failure"
	OnAlways  = "always"
)

var stepNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)

// WorkflowDef is a workflow as it is saved: tasks of one project joined
// into a DAG of named steps.
type WorkflowDef struct {
	Title string `json:"title"`
	// Key names the workflow in configuration as code.
	Key string `json:"key,omitempty"`
	// Timeout bounds a whole run (0: none); the steps still in progress
	// then are killed and the rest skipped.
	Timeout protocol.Duration `json:"timeout,omitempty"`
	// Params are the workflow's params and their defaults: every step gets
	// them, a run may give others.
	Params map[string]string `json:"params,omitempty"`
	// Schedule starts runs by itself when set (nil: runs start by hand or
	// by the API only); it reads as a task's, in Timezone, between StartAt
	// and EndAt.
	Schedule *protocol.Schedule `json:"schedule,omitempty"`
	Timezone string             `json:"timezone,omitempty"`
	StartAt  *time.Time         `json:"start_at,omitempty"`
	EndAt    *time.Time         `json:"end_at,omitempty"`
	// Overlap says what a fire does while a run of the workflow is still
	// going: OverlapSkip (the default: a pipeline rarely wants two runs
	// at once), OverlapQueue (one run waits) or OverlapAllow.
	Overlap string `json:"overlap,omitempty"`
	// Misfire says what happens to fires missed while no master ran the
	// schedule: MisfireSkip (recorded as one skipped run) or MisfireRunOnce.
	Misfire string         `json:"misfire,omitempty"`
	Steps   []WorkflowStep `json:"steps"`
}

// misfireAfter is how late a fire may start and still count as on time;
// a later one was missed (no leader ran the schedule meanwhile).
const misfireAfter = time.Minute

// scheduled reports whether d starts runs by itself.
func (d *WorkflowDef) scheduled() bool { return d.Schedule != nil && d.Schedule.Kind != "" }

// schedulePlan is the plan of d's schedule (id: the workflow's, which
// spreads H forms and intervals like a task's id does).
func (d *WorkflowDef) schedulePlan(id string) (protocol.Plan, error) {
	return protocol.NewPlan(d.asTask(id))
}

// asTask is d's schedule as a task definition, so that a workflow's fires
// follow the very rules of a task's (protocol.Plan, TaskDef.Validate).
func (d *WorkflowDef) asTask(id string) *protocol.TaskDef {
	t := &protocol.TaskDef{ID: id, Title: "workflow", Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Command: "true"},
		Timezone: d.Timezone, StartAt: d.StartAt, EndAt: d.EndAt, Timeout: protocol.Duration(protocol.DefaultTimeout)}
	if d.Schedule != nil {
		t.Schedule = *d.Schedule
	}
	return t
}

// validateSchedule checks d's schedule, zone, window and policies with the
// task's rules, naming the same fields.
func (d *WorkflowDef) validateSchedule(fe protocol.FieldErrors, id string, now time.Time) {
	switch d.Overlap {
	case protocol.OverlapSkip, protocol.OverlapQueue, protocol.OverlapAllow:
	default:
		fe["overlap"] = fmt.Sprintf("%q is not skip, queue or allow", clipText(d.Overlap, 32))
	}
	switch d.Misfire {
	case protocol.MisfireSkip, protocol.MisfireRunOnce:
	default:
		fe["misfire"] = fmt.Sprintf("%q is not skip or run_once", clipText(d.Misfire, 32))
	}
	if !d.scheduled() {
		if d.StartAt != nil || d.EndAt != nil {
			fe["schedule.kind"] = "start_at and end_at bound a schedule: give one (cron, interval or once), or leave them out"
		}
		if d.Timezone != "" && d.Timezone != protocol.DefaultTimezone {
			if _, err := protocol.LoadTimezone(d.Timezone); err != nil {
				fe["timezone"] = err.Error()
			}
		}
		return
	}
	err := d.asTask(id).Validate(now)
	var tfe protocol.FieldErrors
	if errors.As(err, &tfe) {
		for k, v := range tfe {
			if strings.HasPrefix(k, "schedule.") || k == "timezone" || k == "start_at" || k == "end_at" {
				fe[k] = v
			}
		}
	}
}

// WorkflowStep is one step: a task of the workflow's project, the params
// it gives that task, and the steps it waits for.
type WorkflowStep struct {
	Name string `json:"name"`
	// Task is the task's id (in a document, its key or title).
	Task   string            `json:"task"`
	Params map[string]string `json:"params,omitempty"`
	// Timeout, when set, replaces the task's timeout for this step.
	Timeout protocol.Duration `json:"timeout,omitempty"`
	After   []StepEdge        `json:"after,omitempty"`
}

// StepEdge is a step's wait for a parent, and the parent's outcome that
// lets it run: success (the default), failure or always.
type StepEdge struct {
	Step string `json:"step"`
	On   string `json:"on,omitempty"`
}

// normalize trims the text fields and fills the default conditions.
func (d *WorkflowDef) normalize() {
	d.Title, d.Key = strings.TrimSpace(d.Title), strings.TrimSpace(d.Key)
	d.Overlap = strings.ToLower(strings.TrimSpace(d.Overlap))
	if d.Overlap == "" {
		d.Overlap = protocol.OverlapSkip
	}
	d.Misfire = strings.ToLower(strings.TrimSpace(d.Misfire))
	if d.Misfire == "" {
		d.Misfire = protocol.MisfireSkip
	}
	if d.Timezone = strings.TrimSpace(d.Timezone); d.Timezone == "" {
		d.Timezone = protocol.DefaultTimezone
	}
	if d.Schedule != nil {
		d.Schedule.Kind = strings.ToLower(strings.TrimSpace(d.Schedule.Kind))
		d.Schedule.Cron = strings.TrimSpace(d.Schedule.Cron)
		d.Schedule.Align = strings.ToLower(strings.TrimSpace(d.Schedule.Align))
		switch d.Schedule.Kind {
		case "", "manual":
			d.Schedule = nil // runs start by hand only
		case protocol.ScheduleInterval:
			if d.Schedule.Align == "" {
				d.Schedule.Align = protocol.AlignSpread
			}
		}
	}
	for i := range d.Steps {
		s := &d.Steps[i]
		s.Name, s.Task = strings.TrimSpace(s.Name), strings.TrimSpace(s.Task)
		for j := range s.After {
			e := &s.After[j]
			e.Step, e.On = strings.TrimSpace(e.Step), strings.ToLower(strings.TrimSpace(e.On))
			if e.On == "" {
				e.On = OnSuccess
			}
		}
	}
}

// validate checks d on its own, the tasks its steps name aside (taskOK
// says what is wrong with a task id, "" if nothing): every problem as a
// field error naming the step.
func (d *WorkflowDef) validate(id string, now time.Time, taskOK func(id string) string) protocol.FieldErrors {
	fe := protocol.FieldErrors{}
	d.validateSchedule(fe, id, now)
	switch n := utf8.RuneCountInString(d.Title); {
	case !utf8.ValidString(d.Title) || strings.ContainsFunc(d.Title, unicode.IsControl):
		fe["title"] = "must be text (UTF-8, no control characters)"
	case n == 0:
		fe["title"] = "is required"
	case n > protocol.MaxTitleLen:
		fe["title"] = fmt.Sprintf("must be at most %d characters", protocol.MaxTitleLen)
	}
	if d.Key != "" && !protocol.ValidTaskKey(d.Key) {
		fe["key"] = "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	if t := time.Duration(d.Timeout); t < 0 || t > 7*24*time.Hour {
		fe["timeout"] = "must be from 0 (none) to 168h"
	}
	checkParams(fe, "params", d.Params)
	switch {
	case len(d.Steps) == 0:
		fe["steps"] = "a workflow has at least one step"
		return fe
	case len(d.Steps) > MaxWorkflowSteps:
		fe["steps"] = fmt.Sprintf("%d steps: at most %d", len(d.Steps), MaxWorkflowSteps)
		return fe
	}
	index := make(map[string]int, len(d.Steps))
	for i, s := range d.Steps {
		at := fmt.Sprintf("steps[%d]", i)
		switch {
		case !stepNameRE.MatchString(s.Name):
			fe[at+".name"] = "must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'"
		default:
			if j, dup := index[s.Name]; dup {
				fe[at+".name"] = fmt.Sprintf("step %q is steps[%d] already: each step has its own name", s.Name, j)
			} else {
				index[s.Name] = i
			}
		}
		if s.Task == "" {
			fe[at+".task"] = "is required: the task the step runs"
		} else if msg := taskOK(s.Task); msg != "" {
			fe[at+".task"] = msg
		}
		if t := time.Duration(s.Timeout); t < 0 || t > protocol.MaxTimeout || (t > 0 && t < 100*time.Millisecond) {
			fe[at+".timeout"] = fmt.Sprintf("must be 0 (the task's) or from 100ms to %s", protocol.MaxTimeout)
		}
		checkParams(fe, at+".params", s.Params)
	}
	for i, s := range d.Steps {
		seen := map[string]bool{}
		for j, e := range s.After {
			at := fmt.Sprintf("steps[%d].after[%d]", i, j)
			switch _, known := index[e.Step]; {
			case e.Step == s.Name:
				fe[at] = fmt.Sprintf("step %q waits for itself", s.Name)
			case !known:
				fe[at] = fmt.Sprintf("no step is named %q", clipText(e.Step, 64))
			case seen[e.Step]:
				fe[at] = fmt.Sprintf("step %q waits for %q twice: one edge per parent", s.Name, e.Step)
			}
			seen[e.Step] = true
			if e.On != OnSuccess && e.On != OnFailure && e.On != OnAlways {
				fe[at+".on"] = "must be success, failure or always"
			}
		}
	}
	if len(fe) > 0 {
		return fe // a graph with unknown names is not checked further
	}
	if cycle := d.cycle(index); cycle != nil {
		i := index[cycle[0]]
		fe[fmt.Sprintf("steps[%d].after", i)] = "the steps wait for each other in a cycle: " + strings.Join(cycle, " → ")
		return fe
	}
	for name, why := range d.neverRun(index) {
		fe[fmt.Sprintf("steps[%d].after", index[name])] = why
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

// checkParams checks a map of params: names as a task's, values bounded.
func checkParams(fe protocol.FieldErrors, field string, params map[string]string) {
	if len(params) > 100 {
		fe[field] = "at most 100 params"
		return
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		switch {
		case !protocol.ValidParamKey(k):
			fe[field] = fmt.Sprintf("param %q: a name is letters, digits and '_', not starting with a digit", clipText(k, 64))
		case len(v) > maxStepOutput || !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			fe[field] = fmt.Sprintf("param %q: a value is text of at most %d bytes", k, maxStepOutput)
		}
	}
}

// cycle returns a cycle of steps (its first step again at its end), or nil
// when the graph has none.
func (d *WorkflowDef) cycle(index map[string]int) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(d.Steps))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, d.Steps[i].Name)
		for _, e := range d.Steps[i].After {
			j := index[e.Step]
			switch state[j] {
			case onPath:
				start := slices.Index(path, e.Step)
				// path runs parent-wards; a cycle reads in running order.
				c := slices.Clone(path[start:])
				slices.Reverse(c)
				return append(c, c[0])
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range d.Steps {
		if state[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// Outcomes a step's run implies about another step.
const (
	impliesRan    = 1 // it ran (succeeded or failed)
	impliesOK     = 2 // it succeeded
	impliesFailed = 4 // it failed
)

// neverRun finds the steps whose conditions can never all hold, with why:
// a step runs only if each parent ended as its edge says, so its running
// implies outcomes of its ancestors (a success edge: the parent
// succeeded, and so on up); a step that would need one ancestor to both
// succeed and fail never runs. d has no cycle.
func (d *WorkflowDef) neverRun(index map[string]int) map[string]string {
	implied := make([]map[int]int, len(d.Steps))
	bad := map[string]string{}
	var imply func(i int) map[int]int
	imply = func(i int) map[int]int {
		if implied[i] != nil {
			return implied[i]
		}
		m := map[int]int{}
		implied[i] = m // a DAG: no step is reached again while this one is built
		add := func(step, what int) {
			m[step] |= what
			if m[step]&impliesOK != 0 && m[step]&impliesFailed != 0 && bad[d.Steps[i].Name] == "" {
				bad[d.Steps[i].Name] = fmt.Sprintf("step %q can never run: it needs step %q to both succeed and fail",
					d.Steps[i].Name, d.Steps[step].Name)
			}
		}
		for _, e := range d.Steps[i].After {
			j := index[e.Step]
			switch e.On {
			case OnSuccess:
				add(j, impliesRan|impliesOK)
			case OnFailure:
				add(j, impliesRan|impliesFailed)
			default:
				continue // a parent that was skipped lets it run too: nothing follows
			}
			for step, what := range imply(j) {
				add(step, what)
			}
		}
		return m
	}
	for i := range d.Steps {
		imply(i)
	}
	return bad
}

// step is the step named name, nil when none is.
func (d *WorkflowDef) step(name string) *WorkflowStep {
	for i := range d.Steps {
		if d.Steps[i].Name == name {
			return &d.Steps[i]
		}
	}
	return nil
}
