package worker

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Task types.
const (
	TaskHTTP  = "http"
	TaskShell = "shell"
)

// Schedule kinds.
const (
	ScheduleCron     = "cron"
	ScheduleInterval = "interval"
	ScheduleOnce     = "once"
)

// Limits on task definitions, so a typo cannot schedule something absurd.
const (
	MaxTimeout      = 24 * time.Hour
	MinInterval     = time.Second
	MaxInterval     = 366 * 24 * time.Hour
	MaxRetries      = 10
	MaxTitleLen     = 200
	MaxOutputBytes  = 64 << 10
	DefaultTimeout  = 30 * time.Second
	maxParams       = 100
	maxBodyBytes    = 256 << 10
	maxCommandBytes = 16 << 10
)

// Duration is a time.Duration that reads and writes Go duration strings in JSON.
type Duration time.Duration

// MarshalText writes "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 30s or 5m", string(b))
	}
	*d = Duration(v)
	return nil
}

// Schedule says when a task fires.
type Schedule struct {
	Kind  string     `json:"kind"`
	Cron  string     `json:"cron,omitempty"`
	Every Duration   `json:"every,omitempty"`
	At    *time.Time `json:"at,omitempty"`
}

// HTTPSpec is what an HTTP task sends. Success is a 2xx answer.
type HTTPSpec struct {
	Method      string            `json:"method"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
	ContentType string            `json:"content_type"`
	// SecretHeaders names headers (besides Authorization, Cookie,
	// Proxy-Authorization and X-Api-Key, always secret) whose values are sent
	// to workers but shown masked everywhere.
	SecretHeaders []string `json:"secret_headers,omitempty"`
}

// ShellSpec is what a shell task runs. Success is exit code 0.
type ShellSpec struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Dir     string            `json:"dir"`
}

// TaskDef is a task's definition as the master stores it and pushes it to workers.
type TaskDef struct {
	ID          string            `json:"id"`
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Type        string            `json:"type"`
	Schedule    Schedule          `json:"schedule"`
	HTTP        *HTTPSpec         `json:"http"`
	Shell       *ShellSpec        `json:"shell"`
	Timeout     Duration          `json:"timeout"`
	Retries     int               `json:"retries"`
	Params      map[string]string `json:"params"`
	StartAt     *time.Time        `json:"start_at"`
	EndAt       *time.Time        `json:"end_at"`
	// SecretParams names params whose values are sent to workers but shown
	// masked everywhere.
	SecretParams []string `json:"secret_params,omitempty"`
}

// TaskSpec is a task pushed to a worker: the definition plus what the worker
// needs to run it among others.
type TaskSpec struct {
	TaskDef
	// Paused tasks keep their schedule and skip their runs.
	Paused bool `json:"paused"`
	// Executors is how many running nodes run this task; with more than one,
	// each fire is claimed through the master.
	Executors int `json:"executors"`
}

// cronParser accepts five fields, or six with leading seconds, and descriptors like @hourly.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a cron expression with optional seconds.
func ParseCron(expr string) (cron.Schedule, error) {
	if strings.HasPrefix(strings.TrimSpace(expr), "TZ=") || strings.HasPrefix(strings.TrimSpace(expr), "CRON_TZ=") {
		return nil, fmt.Errorf("time zone prefixes are not supported; schedules are in UTC")
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// CronHasSeconds reports whether a cron expression has the optional seconds field.
func CronHasSeconds(expr string) bool {
	return !strings.HasPrefix(expr, "@") && len(strings.Fields(expr)) == 6
}

var (
	headerNameRE = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
	paramKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	methods      = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true, "OPTIONS": true}
)

// Normalize fills defaults (method GET, timeout) and trims text fields.
func (d *TaskDef) Normalize() {
	d.Title = strings.TrimSpace(d.Title)
	d.Schedule.Cron = strings.TrimSpace(d.Schedule.Cron)
	if d.Timeout == 0 {
		d.Timeout = Duration(DefaultTimeout)
	}
	if d.HTTP != nil {
		d.HTTP.Method = strings.ToUpper(strings.TrimSpace(d.HTTP.Method))
		if d.HTTP.Method == "" {
			d.HTTP.Method = "GET"
		}
		d.HTTP.URL = strings.TrimSpace(d.HTTP.URL)
	}
	if d.Shell != nil {
		d.Shell.Command = strings.TrimSpace(d.Shell.Command)
	}
}

// Validate checks every field of a definition and returns FieldErrors, or nil.
// now is used to refuse a one-time schedule in the past.
func (d *TaskDef) Validate(now time.Time) error {
	fe := FieldErrors{}
	switch {
	case d.Title == "":
		fe["title"] = "is required"
	case len(d.Title) > MaxTitleLen:
		fe["title"] = fmt.Sprintf("is longer than %d characters", MaxTitleLen)
	}
	if len(d.Description) > 4000 {
		fe["description"] = "is longer than 4000 characters"
	}
	switch d.Schedule.Kind {
	case ScheduleCron:
		if d.Schedule.Cron == "" {
			fe["schedule.cron"] = "is required for a cron schedule"
		} else if _, err := ParseCron(d.Schedule.Cron); err != nil {
			fe["schedule.cron"] = fmt.Sprintf("%q is not a valid cron expression (5 fields, or 6 with leading seconds): %v", d.Schedule.Cron, err)
		}
	case ScheduleInterval:
		ev := time.Duration(d.Schedule.Every)
		if ev < MinInterval || ev > MaxInterval {
			fe["schedule.every"] = fmt.Sprintf("must be from %s to %s", MinInterval, MaxInterval)
		} else if ev%time.Second != 0 {
			fe["schedule.every"] = "must be a whole number of seconds"
		}
	case ScheduleOnce:
		switch {
		case d.Schedule.At == nil:
			fe["schedule.at"] = "is required for a one-time schedule"
		case d.Schedule.At.Before(now.Add(-time.Minute)):
			fe["schedule.at"] = "is in the past"
		}
	case "":
		fe["schedule.kind"] = "is required: cron, interval or once"
	default:
		fe["schedule.kind"] = fmt.Sprintf("%q is not cron, interval or once", d.Schedule.Kind)
	}
	if d.StartAt != nil && d.EndAt != nil && !d.EndAt.After(*d.StartAt) {
		fe["end_at"] = "must be after start_at"
	}
	if d.EndAt != nil && d.EndAt.Before(now) {
		fe["end_at"] = "is in the past"
	}
	if to := time.Duration(d.Timeout); to <= 0 || to > MaxTimeout {
		fe["timeout"] = fmt.Sprintf("must be more than 0 and at most %s", MaxTimeout)
	} else if to < 100*time.Millisecond {
		fe["timeout"] = "must be at least 100ms"
	}
	if d.Retries < 0 || d.Retries > MaxRetries {
		fe["retries"] = fmt.Sprintf("must be from 0 to %d", MaxRetries)
	}
	if len(d.Params) > maxParams {
		fe["params"] = fmt.Sprintf("at most %d parameters", maxParams)
	}
	for k, v := range d.Params {
		if !paramKeyRE.MatchString(k) {
			fe["params"] = fmt.Sprintf("key %q must be letters, digits and '_', not starting with a digit", k)
		} else if len(v) > 4096 {
			fe["params"] = fmt.Sprintf("value of %q is longer than 4096 bytes", k)
		}
	}
	switch d.Type {
	case TaskHTTP:
		if d.Shell != nil {
			fe["shell"] = "must be empty for an http task"
		}
		d.validateHTTP(fe)
	case TaskShell:
		if d.HTTP != nil {
			fe["http"] = "must be empty for a shell task"
		}
		d.validateShell(fe)
	case "":
		fe["type"] = "is required: http or shell"
	default:
		fe["type"] = fmt.Sprintf("%q is not http or shell", d.Type)
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

func (d *TaskDef) validateHTTP(fe FieldErrors) {
	h := d.HTTP
	if h == nil {
		fe["http.url"] = "is required for an http task"
		return
	}
	if !methods[h.Method] {
		fe["http.method"] = fmt.Sprintf("%q is not one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS", h.Method)
	}
	u, err := url.Parse(h.URL)
	switch {
	case h.URL == "":
		fe["http.url"] = "is required"
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		fe["http.url"] = fmt.Sprintf("%q is not an absolute http(s) URL", h.URL)
	case len(h.URL) > 4096:
		fe["http.url"] = "is longer than 4096 characters"
	}
	for k, v := range h.Headers {
		if !headerNameRE.MatchString(k) {
			fe["http.headers"] = fmt.Sprintf("%q is not a valid header name", k)
		} else if strings.ContainsAny(v, "\r\n") {
			fe["http.headers"] = fmt.Sprintf("value of %q has a line break", k)
		}
	}
	if len(h.Body) > maxBodyBytes {
		fe["http.body"] = fmt.Sprintf("is larger than %d KiB", maxBodyBytes>>10)
	}
	if strings.ContainsAny(h.ContentType, "\r\n") {
		fe["http.content_type"] = "has a line break"
	}
}

func (d *TaskDef) validateShell(fe FieldErrors) {
	s := d.Shell
	if s == nil || s.Command == "" {
		fe["shell.command"] = "is required for a shell task"
		return
	}
	size := len(s.Command)
	for _, a := range s.Args {
		size += len(a)
	}
	if size > maxCommandBytes {
		fe["shell.command"] = fmt.Sprintf("command and args are larger than %d KiB", maxCommandBytes>>10)
	}
	for k := range s.Env {
		if !paramKeyRE.MatchString(k) {
			fe["shell.env"] = fmt.Sprintf("%q is not a valid variable name", k)
		}
	}
}

// Run results.
const (
	ResultSuccess = "success"
	ResultFailed  = "failed"
	ResultTimeout = "timeout"
	ResultSkipped = "skipped"
)

// RunReport is one run of a task on a worker, delivered to the master in batches.
// Its ID makes delivery idempotent: the master stores each ID once.
type RunReport struct {
	ID          string    `json:"id"`
	TaskID      string    `json:"task_id"`
	Node        string    `json:"node"`
	ScheduledAt time.Time `json:"scheduled_at"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	DurationMS  int64     `json:"duration_ms"`
	Result      string    `json:"result"`
	Attempt     int       `json:"attempt"`
	HTTPStatus  int       `json:"http_status"`
	ExitCode    *int      `json:"exit_code"`
	Output      string    `json:"output"`
	Manual      bool      `json:"manual"`
	// BinaryOutput says the output held NUL bytes or invalid UTF-8, which
	// were replaced by U+FFFD so it can be stored and shown safely.
	BinaryOutput bool `json:"binary_output,omitempty"`
}

// Validate checks a report received by the master.
func (r *RunReport) Validate() error {
	switch {
	case r.ID == "" || len(r.ID) > 64:
		return fmt.Errorf("%w: run id must be 1-64 characters", ErrInvalid)
	case r.TaskID == "" || len(r.TaskID) > 64:
		return fmt.Errorf("%w: run %s: task id must be 1-64 characters", ErrInvalid, r.ID)
	case r.Result != ResultSuccess && r.Result != ResultFailed && r.Result != ResultTimeout && r.Result != ResultSkipped:
		return fmt.Errorf("%w: run %s: result %q is not success, failed, timeout or skipped", ErrInvalid, r.ID, r.Result)
	case r.Attempt < 1 || r.Attempt > MaxRetries+1:
		return fmt.Errorf("%w: run %s: attempt %d out of range", ErrInvalid, r.ID, r.Attempt)
	case len(r.Output) > MaxOutputBytes+1024:
		return fmt.Errorf("%w: run %s: output larger than %d bytes", ErrInvalid, r.ID, MaxOutputBytes)
	case r.StartedAt.IsZero() || r.EndedAt.Before(r.StartedAt):
		return fmt.Errorf("%w: run %s: started_at/ended_at missing or reversed", ErrInvalid, r.ID)
	}
	return nil
}

// RunsRequest is the body of POST /api/worker/runs.
type RunsRequest struct {
	Runs []RunReport `json:"runs"`
}

// RunsResponse answers a batch run by run: how many reports were new, how
// many were duplicates, and which were refused as invalid. A refused run is
// dropped by the worker (logged and counted), never sent again; a batch that
// failed as a whole (5xx, unreachable master) is kept and retried.
type RunsResponse struct {
	Accepted   int           `json:"accepted"`
	Duplicates int           `json:"duplicates"`
	Rejected   []RunRejected `json:"rejected,omitempty"`
}

// RunRejected names one run of a batch the master refused, and why.
type RunRejected struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// LockRequest is the body of POST /api/worker/lock: a claim of one fire.
type LockRequest struct {
	TaskID string    `json:"task_id"`
	FireAt time.Time `json:"fire_at"`
}

// LockResponse says whether this node won the fire.
type LockResponse struct {
	Won    bool   `json:"won"`
	Winner string `json:"winner"`
}

// TaskRef is the body of stop, pause and resume: {"id"}.
type TaskRef struct {
	ID string `json:"id"`
}

// RunOnceRequest is the body of POST /api/task/runonce: the id, and the
// definition for a task the worker is not scheduling.
type RunOnceRequest struct {
	ID   string    `json:"id"`
	Task *TaskSpec `json:"task,omitempty"`
}
