package form

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// Task reads the task form: the values as typed, the engine's input and the
// errors of text fields that do not parse. When some do not parse, the
// definition is also checked here, so the form shows every problem at once.
func Task(v url.Values) (views.TaskFields, master.TaskInput, protocol.FieldErrors) {
	get := func(k string) string { return v.Get(k) }
	trim := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := views.TaskFields{
		Title: get("title"), Description: get("description"), Type: get("type"),
		ScheduleKind: get("schedule_kind"), Cron: get("schedule_cron"),
		Every: trim("schedule_every"), At: trim("schedule_at"), StartAt: trim("start_at"), EndAt: trim("end_at"),
		Timeout: trim("timeout"), Retries: trim("retries"),
		Params: get("params"), Keepers: get("keepers"), SecretParams: get("secret_params"),
		SecretHeaders: get("http_secret_headers"),
		HTTPMethod:    trim("http_method"), HTTPURL: get("http_url"), HTTPHeaders: get("http_headers"), HTTPBody: get("http_body"),
		HTTPContentType: trim("http_content_type"),
		ShellCommand:    get("shell_command"), ShellArgs: get("shell_args"), ShellEnv: get("shell_env"), ShellDir: trim("shell_dir"),
		Timezone: trim("timezone"), Overlap: trim("overlap"), Routing: trim("routing"), RoutingKey: trim("routing_key"),
		Misfire: trim("misfire"), Selector: get("selector"), Align: trim("schedule_align"), AtCapacity: trim("at_capacity"),
		Version: trim("version"), Note: get("note"),
	}
	in := master.TaskInput{
		TaskDef: protocol.TaskDef{
			Title: f.Title, Description: f.Description, Type: f.Type,
			SecretParams: List(f.SecretParams),
			Overlap:      f.Overlap,
			Routing:      f.Routing, RoutingKey: f.RoutingKey,
			Misfire:    f.Misfire,
			AtCapacity: f.AtCapacity,
		},
		Executors: v["executors"],
		Selector:  f.Selector,
		Keepers:   List(f.Keepers),
		Children:  v["children"],
		Note:      f.Note,
	}
	_, _, fe := scheduleInto(ScheduleFields{Kind: f.ScheduleKind, Cron: f.Cron, Every: f.Every, Align: f.Align, At: f.At,
		StartAt: f.StartAt, EndAt: f.EndAt, Timezone: f.Timezone}, &in.TaskDef)
	if f.Version != "" {
		// Hidden: a version that does not read is no version (no check).
		if n, err := strconv.Atoi(f.Version); err == nil && n > 0 {
			in.Version = n
		}
	}
	var err error
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		switch {
		case err != nil:
			fe["timeout"] = fmt.Sprintf("%q is not a duration like 30s or 5m", f.Timeout)
		case d == 0:
			fe["timeout"] = "must be more than 0"
		}
		in.Timeout = protocol.Duration(d)
	}
	if f.Retries != "" {
		n, err := strconv.Atoi(f.Retries)
		if err != nil {
			fe["retries"] = fmt.Sprintf("must be a whole number from 0 to %d", protocol.MaxRetries)
		}
		in.Retries = n
	}
	if in.Params, err = Pairs(f.Params, "="); err != nil {
		fe["params"] = err.Error()
	}
	switch f.Type {
	case protocol.TaskHTTP:
		h := &protocol.HTTPSpec{Method: f.HTTPMethod, URL: f.HTTPURL, Body: f.HTTPBody, ContentType: f.HTTPContentType,
			SecretHeaders: List(f.SecretHeaders)}
		if h.Headers, err = Pairs(f.HTTPHeaders, ":"); err != nil {
			fe["http.headers"] = err.Error()
		}
		in.HTTP = h
	case protocol.TaskShell:
		sh := &protocol.ShellSpec{Command: f.ShellCommand, Args: Lines(f.ShellArgs), Dir: f.ShellDir}
		if sh.Env, err = Pairs(f.ShellEnv, "="); err != nil {
			fe["shell.env"] = err.Error()
		}
		in.Shell = sh
	}
	if len(fe) > 0 {
		def := in.TaskDef
		def.Normalize()
		master.Merge(fe, def.Validate(time.Now()))
	}
	return f, in, fe
}

// TaskFieldsOf fills the task form from a stored task, its secrets masked.
func TaskFieldsOf(stored *master.Task) views.TaskFields {
	masked := master.MaskTask(*stored)
	t := &masked
	loc, err := protocol.LoadTimezone(t.Timezone)
	if err != nil {
		loc = time.UTC
	}
	f := views.TaskFields{
		Timezone: t.Timezone, Overlap: t.Overlap, Routing: t.Routing, RoutingKey: t.RoutingKey, Misfire: t.Misfire,
		AtCapacity: t.AtCapacity, Align: t.Schedule.Align,
		SecretParams: strings.Join(t.SecretParams, ", "),
		Title:        t.Title, Description: t.Description, Type: t.Type, ScheduleKind: t.Schedule.Kind,
		Cron: t.Schedule.Cron, At: FormatTimeIn(t.Schedule.At, loc), StartAt: FormatTimeIn(t.StartAt, loc), EndAt: FormatTimeIn(t.EndAt, loc),
		Timeout: duration(time.Duration(t.Timeout)), Retries: strconv.Itoa(t.Retries),
		Params: JoinPairs(t.Params, "="), Keepers: strings.Join(t.Keepers, ", "), HTTPMethod: "GET",
		Selector: t.Selector,
	}
	if t.Version > 0 {
		f.Version = strconv.Itoa(t.Version)
	}
	if t.Schedule.Every > 0 {
		f.Every = duration(time.Duration(t.Schedule.Every))
	}
	if t.Schedule.Kind == protocol.ScheduleInterval && f.Align == "" {
		f.Align = protocol.AlignEpoch // stored before alignments existed
	}
	if h := t.HTTP; h != nil {
		f.HTTPMethod, f.HTTPURL, f.HTTPBody, f.HTTPContentType = h.Method, h.URL, h.Body, h.ContentType
		f.HTTPHeaders = JoinPairs(h.Headers, ": ")
		f.SecretHeaders = strings.Join(h.SecretHeaders, ", ")
	}
	if sh := t.Shell; sh != nil {
		f.ShellCommand, f.ShellDir = sh.Command, sh.Dir
		f.ShellArgs = strings.Join(sh.Args, "\n")
		f.ShellEnv = JoinPairs(sh.Env, "=")
	}
	return f
}
