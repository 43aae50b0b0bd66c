package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// readTaskForm parses the task form into the view model (exactly as typed), the
// engine's input and the errors of text fields that do not parse. When some do
// not parse, the definition is also checked here, so the form shows every
// problem at once.
func (s *server) readTaskForm(c *gin.Context, edit bool) (views.TaskFormVM, master.TaskInput, protocol.FieldErrors) {
	title := "New task"
	if edit {
		title = "Edit task"
	}
	vm := views.TaskFormVM{
		Layout: s.layout(c, title, "tasks"), Edit: edit, ID: c.Param("id"),
		Title: c.PostForm("title"), Description: c.PostForm("description"), Type: c.PostForm("type"),
		ScheduleKind: c.PostForm("schedule_kind"), Cron: c.PostForm("schedule_cron"),
		Every: strings.TrimSpace(c.PostForm("schedule_every")), At: strings.TrimSpace(c.PostForm("schedule_at")),
		StartAt: strings.TrimSpace(c.PostForm("start_at")), EndAt: strings.TrimSpace(c.PostForm("end_at")),
		Timeout: strings.TrimSpace(c.PostForm("timeout")), Retries: strings.TrimSpace(c.PostForm("retries")),
		Params: c.PostForm("params"), Keepers: c.PostForm("keepers"), SecretParams: c.PostForm("secret_params"),
		SecretHeaders: c.PostForm("http_secret_headers"),
		HTTPMethod:    strings.TrimSpace(c.PostForm("http_method")), HTTPURL: c.PostForm("http_url"),
		HTTPHeaders: c.PostForm("http_headers"), HTTPBody: c.PostForm("http_body"),
		HTTPContentType: strings.TrimSpace(c.PostForm("http_content_type")),
		ShellCommand:    c.PostForm("shell_command"), ShellArgs: c.PostForm("shell_args"),
		ShellEnv: c.PostForm("shell_env"), ShellDir: strings.TrimSpace(c.PostForm("shell_dir")),
		Timezone: strings.TrimSpace(c.PostForm("timezone")),
		Overlap:  strings.TrimSpace(c.PostForm("overlap")),
		Routing:  strings.TrimSpace(c.PostForm("routing")), RoutingKey: strings.TrimSpace(c.PostForm("routing_key")),
		Misfire: strings.TrimSpace(c.PostForm("misfire")),
	}
	fe := protocol.FieldErrors{}
	// The form's times are wall clock times in the task's zone; an unknown
	// zone is named by Validate, the times read as UTC meanwhile.
	loc, err := protocol.LoadTimezone(vm.Timezone)
	if err != nil {
		loc = time.UTC
	}
	in := master.TaskInput{
		TaskDef: protocol.TaskDef{
			Title: vm.Title, Description: vm.Description, Type: vm.Type,
			Schedule:     protocol.Schedule{Kind: vm.ScheduleKind},
			SecretParams: splitList(vm.SecretParams),
			Timezone:     vm.Timezone,
			Overlap:      vm.Overlap,
			Routing:      vm.Routing, RoutingKey: vm.RoutingKey,
			Misfire: vm.Misfire,
		},
		Executors: c.PostFormArray("executors"),
		Keepers:   splitList(vm.Keepers),
		Children:  c.PostFormArray("children"),
	}
	switch vm.ScheduleKind {
	case protocol.ScheduleCron:
		in.Schedule.Cron = vm.Cron
	case protocol.ScheduleInterval:
		if vm.Every != "" {
			d, err := time.ParseDuration(vm.Every)
			if err != nil {
				fe["schedule.every"] = fmt.Sprintf("%q is not a duration like 2s, 5m or 1h", vm.Every)
			}
			in.Schedule.Every = protocol.Duration(d)
		}
	case protocol.ScheduleOnce:
		at, err := parseFormTimeIn(vm.At, loc)
		if err != nil {
			fe["schedule.at"] = err.Error()
		}
		in.Schedule.At = at
	}
	if in.StartAt, err = parseFormTimeIn(vm.StartAt, loc); err != nil {
		fe["start_at"] = err.Error()
	}
	if in.EndAt, err = parseFormTimeIn(vm.EndAt, loc); err != nil {
		fe["end_at"] = err.Error()
	}
	if vm.Timeout != "" {
		d, err := time.ParseDuration(vm.Timeout)
		switch {
		case err != nil:
			fe["timeout"] = fmt.Sprintf("%q is not a duration like 30s or 5m", vm.Timeout)
		case d == 0:
			fe["timeout"] = "must be more than 0"
		}
		in.Timeout = protocol.Duration(d)
	}
	if vm.Retries != "" {
		n, err := strconv.Atoi(vm.Retries)
		if err != nil {
			fe["retries"] = fmt.Sprintf("must be a whole number from 0 to %d", protocol.MaxRetries)
		}
		in.Retries = n
	}
	if in.Params, err = parsePairs(vm.Params, "="); err != nil {
		fe["params"] = err.Error()
	}
	switch vm.Type {
	case protocol.TaskHTTP:
		h := &protocol.HTTPSpec{Method: vm.HTTPMethod, URL: vm.HTTPURL, Body: vm.HTTPBody, ContentType: vm.HTTPContentType,
			SecretHeaders: splitList(vm.SecretHeaders)}
		if h.Headers, err = parsePairs(vm.HTTPHeaders, ":"); err != nil {
			fe["http.headers"] = err.Error()
		}
		in.HTTP = h
	case protocol.TaskShell:
		sh := &protocol.ShellSpec{Command: vm.ShellCommand, Args: splitLines(vm.ShellArgs), Dir: vm.ShellDir}
		if sh.Env, err = parsePairs(vm.ShellEnv, "="); err != nil {
			fe["shell.env"] = err.Error()
		}
		in.Shell = sh
	}
	if len(fe) > 0 {
		def := in.TaskDef
		def.Normalize()
		master.Merge(fe, def.Validate(time.Now()))
	}
	return vm, in, fe
}

// taskFormError puts an engine error into the form and returns the status to
// answer with; 0 means it already answered 500.
func (s *server) taskFormError(c *gin.Context, err error, vm *views.TaskFormVM) int {
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		vm.Errors = fe
		return http.StatusUnprocessableEntity
	}
	st := errorStatus(err)
	if st == 0 {
		s.serverError(c, err)
		return 0
	}
	vm.FormError = master.Message(err)
	return st
}

// renderTaskForm fills the executor and child choices and shows the form.
func (s *server) renderTaskForm(c *gin.Context, status int, vm views.TaskFormVM) {
	if vm.Locked == "" {
		executors := c.PostFormArray("executors")
		children := c.PostFormArray("children")
		if err := s.taskFormOptions(c.Request.Context(), &vm, executors, children); err != nil {
			s.serverError(c, err)
			return
		}
	}
	vm.OtherErrors = otherErrors(vm.Errors)
	s.render(c, status, views.TaskFormPage(vm))
}

// taskFormOptions lists the workers and the other tasks as checkboxes, the
// given ones checked; a checked name that no longer exists is still shown.
func (s *server) taskFormOptions(ctx context.Context, vm *views.TaskFormVM, executors, children []string) error {
	nodes, err := s.m.ListNodes(ctx)
	if err != nil {
		return err
	}
	checked := map[string]bool{}
	for _, e := range executors {
		checked[e] = true
	}
	vm.Executors = vm.Executors[:0]
	for _, n := range nodes {
		if n.Type != master.TypeWorker {
			continue
		}
		vm.Executors = append(vm.Executors, views.NodeOption{Name: n.Name, StatusName: n.Status.String(), Checked: checked[n.Name]})
		delete(checked, n.Name)
	}
	for _, e := range executors {
		if checked[e] {
			vm.Executors = append(vm.Executors, views.NodeOption{Name: e, StatusName: "unknown", Checked: true})
			delete(checked, e)
		}
	}
	tasks, _, err := s.m.ListTasks(ctx, master.TaskFilter{Limit: 500})
	if err != nil {
		return err
	}
	checked = map[string]bool{}
	for _, ch := range children {
		checked[ch] = true
	}
	vm.Children = vm.Children[:0]
	for _, t := range tasks {
		if t.ID == vm.ID {
			continue
		}
		vm.Children = append(vm.Children, views.TaskOption{ID: t.ID, Title: t.Title, Checked: checked[t.ID]})
		delete(checked, t.ID)
	}
	for _, ch := range children {
		if checked[ch] {
			vm.Children = append(vm.Children, views.TaskOption{ID: ch, Title: ch, Checked: true})
			delete(checked, ch)
		}
	}
	return nil
}

// otherErrors are the messages of fields the form has no place for.
func otherErrors(fe map[string]string) []string {
	known := map[string]bool{}
	for _, f := range views.TaskFormFields {
		known[f] = true
	}
	var out []string
	for k, v := range fe {
		if !known[k] {
			out = append(out, k+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

// taskFormFromTask fills the form with a stored task, its secrets masked:
// saving the mask unchanged keeps the stored value.
func taskFormFromTask(stored *master.Task) views.TaskFormVM {
	masked := master.MaskTask(*stored)
	t := &masked
	loc, err := protocol.LoadTimezone(t.Timezone)
	if err != nil {
		loc = time.UTC
	}
	vm := views.TaskFormVM{
		Timezone: t.Timezone,
		Overlap:  t.Overlap,
		Routing:  t.Routing, RoutingKey: t.RoutingKey,
		Misfire:      t.Misfire,
		SecretParams: strings.Join(t.SecretParams, ", "),
		ID:           t.ID, Title: t.Title, Description: t.Description, Type: t.Type, ScheduleKind: t.Schedule.Kind,
		Cron: t.Schedule.Cron, At: formTimeIn(t.Schedule.At, loc), StartAt: formTimeIn(t.StartAt, loc), EndAt: formTimeIn(t.EndAt, loc),
		Timeout: shortDuration(time.Duration(t.Timeout)), Retries: strconv.Itoa(t.Retries),
		Params: joinPairs(t.Params, "="), Keepers: strings.Join(t.Keepers, ", "), HTTPMethod: "GET",
	}
	if t.Schedule.Every > 0 {
		vm.Every = shortDuration(time.Duration(t.Schedule.Every))
	}
	if h := t.HTTP; h != nil {
		vm.HTTPMethod, vm.HTTPURL, vm.HTTPBody, vm.HTTPContentType = h.Method, h.URL, h.Body, h.ContentType
		vm.HTTPHeaders = joinPairs(h.Headers, ": ")
		vm.SecretHeaders = strings.Join(h.SecretHeaders, ", ")
	}
	if sh := t.Shell; sh != nil {
		vm.ShellCommand, vm.ShellDir = sh.Command, sh.Dir
		vm.ShellArgs = strings.Join(sh.Args, "\n")
		vm.ShellEnv = joinPairs(sh.Env, "=")
	}
	return vm
}

// formTimeLayouts are what a datetime-local input sends (with or without
// seconds), and what a person might type instead.
var formTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05", time.RFC3339}

// parseFormTime reads a datetime-local value as UTC; "" is no time.
func parseFormTime(v string) (*time.Time, error) { return parseFormTimeIn(v, time.UTC) }

// parseFormTimeIn reads a datetime-local value as a wall clock time in loc
// (the task's time zone); "" is no time.
func parseFormTimeIn(v string, loc *time.Location) (*time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	for _, layout := range formTimeLayouts {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, fmt.Errorf("%q is not a date and time like 2030-01-02T15:04 (%s)", v, loc)
}

// formTimeIn writes a time for a datetime-local input, in loc.
func formTimeIn(t *time.Time, loc *time.Location) string {
	if t == nil {
		return ""
	}
	u := t.In(loc)
	if u.Second() != 0 {
		return u.Format("2006-01-02T15:04:05")
	}
	return u.Format("2006-01-02T15:04")
}

// parsePairs reads one "key<sep>value" per line; blank lines are skipped.
func parsePairs(text, sep string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d has no '%s'", i+1, sep)
		case k == "":
			return nil, fmt.Errorf("line %d has nothing before '%s'", i+1, sep)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d repeats %q", i+1, k)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func joinPairs(m map[string]string, sep string) string {
	lines := make([]string, 0, len(m))
	for _, kv := range sortedKV(m) {
		lines = append(lines, kv.Key+sep+kv.Value)
	}
	return strings.Join(lines, "\n")
}

// splitLines returns the non-blank lines of a textarea, trimmed.
func splitLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// splitList reads "a, b, c".
func splitList(text string) []string {
	var out []string
	for _, v := range strings.Split(text, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
