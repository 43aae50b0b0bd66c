package protocol

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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
	MaxTimeout  = 24 * time.Hour
	MinInterval = time.Second
	MaxInterval = 366 * 24 * time.Hour
	MaxRetries  = 10
	MaxTitleLen = 200
	// MaxDescriptionLen bounds a task's description.
	MaxDescriptionLen = 4000
	MaxOutputBytes    = 64 << 10
	DefaultTimeout    = 30 * time.Second
	maxParams         = 100
	maxParamValue     = 4096
	maxBodyBytes      = 256 << 10
	maxCommandBytes   = 16 << 10
	maxHeaders        = 50
	maxHeaderValue    = 8 << 10
	// controlChars may not reach a request line or header.
	controlChars = "\r\n\x00"
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
	Kind string `json:"kind"`
	// Cron is a cron expression; its H forms (ExpandHashed) pick stable
	// values per task, so tasks spread over the hour or the day.
	Cron  string     `json:"cron,omitempty"`
	Every Duration   `json:"every,omitempty"`
	At    *time.Time `json:"at,omitempty"`
	// Align is, for an interval, where in the interval the task fires:
	// AlignSpread (at its own stable offset, IntervalPhase) or AlignEpoch
	// (at the multiples of the interval). "" reads as AlignEpoch, as every
	// interval task made before spreading existed; the master gives a new
	// interval task AlignSpread unless it names one.
	Align string `json:"align,omitempty"`
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
	ID string `json:"id"`
	// Key is an optional stable name that configuration as code (master's
	// Apply) matches the task by, so its title may change; at most one task
	// that is not deleted holds a key.
	Key         string     `json:"key,omitempty"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Type        string     `json:"type"`
	Schedule    Schedule   `json:"schedule"`
	HTTP        *HTTPSpec  `json:"http"`
	Shell       *ShellSpec `json:"shell"`
	// NATS, AMQP, MQTT, Redis, Kafka, SQL and GRPC define the tasks of the
	// types beyond HTTP and shell (TypeSpec; Spec returns the one of Type).
	NATS    *NATSSpec         `json:"nats,omitempty"`
	AMQP    *AMQPSpec         `json:"amqp,omitempty"`
	MQTT    *MQTTSpec         `json:"mqtt,omitempty"`
	Redis   *RedisSpec        `json:"redis,omitempty"`
	Kafka   *KafkaSpec        `json:"kafka,omitempty"`
	SQL     *SQLSpec          `json:"sql,omitempty"`
	GRPC    *GRPCSpec         `json:"grpc,omitempty"`
	Timeout Duration          `json:"timeout"`
	Retries int               `json:"retries"`
	Params  map[string]string `json:"params"`
	StartAt *time.Time        `json:"start_at"`
	EndAt   *time.Time        `json:"end_at"`
	// SecretParams names params whose values are sent to workers but shown
	// masked everywhere.
	SecretParams []string `json:"secret_params,omitempty"`
	// Overlap says what a fire does while the task's previous run is still
	// going on the same worker: OverlapAllow, OverlapSkip or OverlapQueue.
	Overlap string `json:"overlap"`
	// Timezone is the IANA zone ("Europe/Berlin") the cron expression reads
	// wall clock times in; DefaultTimezone (UTC) when empty.
	Timezone string `json:"timezone"`
	// Routing says which executor runs a fire when the task has several:
	// RoutingWeighted (the default), RoutingRoundRobin, RoutingFailover,
	// RoutingLeastBusy, RoutingHash or RoutingBroadcast.
	Routing string `json:"routing"`
	// RoutingKey names the param whose value RoutingHash hashes, so fires
	// with the same value land on the same executor.
	RoutingKey string `json:"routing_key,omitempty"`
	// Misfire says what happens to fires that were due while the task could
	// not run (its claim could not reach a master): MisfireSkip or
	// MisfireRunOnce.
	Misfire string `json:"misfire"`
	// AtCapacity says what a fire does when its worker already runs as many
	// runs as its max concurrency: AtCapacityWait (the default) waits its
	// turn, in order, for up to the task's timeout; AtCapacitySkip is
	// recorded skipped at once. Either way a fire that gets no slot is
	// recorded once, as one skipped run, and not retried.
	AtCapacity string `json:"at_capacity"`
}

// At-capacity policies: what a fire does when its worker is full.
const (
	// AtCapacityWait queues the fire (first come, first served) for up to
	// the task's timeout.
	AtCapacityWait = "wait"
	// AtCapacitySkip records the fire skipped at once.
	AtCapacitySkip = "skip"
)

// Misfire policies: what happens to fires that were due while the task could
// not run. Either way the missed fires are recorded, never only logged.
const (
	// MisfireSkip records the missed fires of a window as one skipped run
	// with their count (the default).
	MisfireSkip = "skip"
	// MisfireRunOnce runs one catch-up run as soon as the task can run again,
	// scheduled at the first missed fire.
	MisfireRunOnce = "run_once"
)

// Routing strategies: how the executor of a fire is chosen among the task's
// running executors.
const (
	// RoutingWeighted picks at random in proportion to executor priority.
	RoutingWeighted = "weighted"
	// RoutingRoundRobin rotates through the executors fire after fire.
	RoutingRoundRobin = "round_robin"
	// RoutingFailover picks the highest-priority executor, the next when it is down.
	RoutingFailover = "failover"
	// RoutingLeastBusy picks the executor with the fewest recent runs.
	RoutingLeastBusy = "least_busy"
	// RoutingHash picks by a rendezvous hash of the routing_key param's value.
	RoutingHash = "hash"
	// RoutingBroadcast runs every fire on every running executor.
	RoutingBroadcast = "broadcast"
)

// Overlap policies: what a fire does while the previous run of the same task
// is still going on the worker that got the fire.
const (
	// OverlapAllow runs the fire alongside the previous run (the default).
	OverlapAllow = "allow"
	// OverlapSkip records the fire as a skipped run saying why.
	OverlapSkip = "skip"
	// OverlapQueue runs the fire when the previous run ends; at most one
	// fire waits, a further one is recorded skipped.
	OverlapQueue = "queue"
)

// TaskSpec is a task pushed to a worker: the definition plus what the worker
// needs to run it among others.
type TaskSpec struct {
	TaskDef
	// Paused tasks keep their schedule and skip their runs.
	Paused bool `json:"paused"`
	// Executors is how many running nodes run this task; with more than one,
	// each fire is claimed through the master.
	Executors int `json:"executors"`
	// ShardIndex and ShardTotal place this worker among the task's running
	// executors (0-based, by name) for broadcast routing, which runs every
	// fire everywhere without a claim.
	ShardIndex int `json:"shard_index,omitempty"`
	ShardTotal int `json:"shard_total,omitempty"`
	// Version is the number of the task's definition (its saved version);
	// the runs of this spec report it. 0 for a delayed task.
	Version int `json:"version,omitempty"`
	// Connection is the named connection the task's type uses, secret
	// included, attached by the master to what it sends a worker that runs
	// the task (never stored with the task); nil for HTTP and shell, and
	// when the connection is not defined (the run fails and says so).
	Connection *ConnectionSpec `json:"connection,omitempty"`
	// ProjectID is the task's project, for the master to find its
	// connection by name; never sent.
	ProjectID int64 `json:"-"`
}

var (
	headerNameRE = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
	paramKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	taskKeyRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	methods      = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true, "OPTIONS": true}
)

// ValidTaskKey reports whether key is a valid task key (also a
// workflow's): 1-100 letters, digits, '.', '_' or '-', starting with a
// letter or digit.
func ValidTaskKey(key string) bool { return taskKeyRE.MatchString(key) }

// ValidParamKey reports whether name is a valid param name: letters,
// digits and '_', not starting with a digit, at most 64.
func ValidParamKey(name string) bool { return paramKeyRE.MatchString(name) }

// Normalize fills defaults (method GET, timeout) and trims text fields.
func (d *TaskDef) Normalize() {
	d.Title = strings.TrimSpace(d.Title)
	d.Key = strings.TrimSpace(d.Key)
	d.Overlap = strings.ToLower(strings.TrimSpace(d.Overlap))
	if d.Overlap == "" {
		d.Overlap = OverlapAllow
	}
	d.Misfire = strings.ToLower(strings.TrimSpace(d.Misfire))
	if d.Misfire == "" {
		d.Misfire = MisfireSkip
	}
	d.AtCapacity = strings.ToLower(strings.TrimSpace(d.AtCapacity))
	if d.AtCapacity == "" {
		d.AtCapacity = AtCapacityWait
	}
	d.Schedule.Cron = strings.TrimSpace(d.Schedule.Cron)
	d.Schedule.Align = strings.ToLower(strings.TrimSpace(d.Schedule.Align))
	d.Routing = strings.ToLower(strings.TrimSpace(d.Routing))
	if d.Routing == "" {
		d.Routing = RoutingWeighted
	}
	d.RoutingKey = strings.TrimSpace(d.RoutingKey)
	if d.Timezone = strings.TrimSpace(d.Timezone); d.Timezone == "" {
		d.Timezone = DefaultTimezone
	}
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
	if s := d.Spec(); s != nil {
		s.normalize()
	}
}

// Validate checks every field of a definition and returns FieldErrors, or nil.
// now is used to refuse a one-time schedule in the past.
func (d *TaskDef) Validate(now time.Time) error {
	fe := FieldErrors{}
	switch {
	case d.Title == "":
		fe["title"] = "is required"
	case utf8.RuneCountInString(d.Title) > MaxTitleLen:
		fe["title"] = fmt.Sprintf("is longer than %d characters", MaxTitleLen)
	}
	if d.Key != "" && !taskKeyRE.MatchString(d.Key) {
		fe["key"] = "must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	if utf8.RuneCountInString(d.Description) > MaxDescriptionLen {
		fe["description"] = fmt.Sprintf("is longer than %d characters", MaxDescriptionLen)
	}
	loc, err := LoadTimezone(d.Timezone)
	if err != nil {
		fe["timezone"] = err.Error()
		loc = time.UTC
	}
	switch d.Schedule.Kind {
	case ScheduleCron:
		if d.Schedule.Cron == "" {
			fe["schedule.cron"] = "is required for a cron schedule"
		} else if expr, err := ExpandHashed(d.Schedule.Cron, d.ID); err != nil {
			fe["schedule.cron"] = err.Error() // a sentence naming the field, as below
		} else if sch, err := ParseCronIn(expr, loc); err != nil {
			fe["schedule.cron"] = err.Error() // a sentence naming the field and why (cronSentence)
		} else if plan := planOf(d, loc, sch, expr); d.EndAt != nil {
			if _, ok := plan.Next(now); !ok {
				fe["schedule.cron"] = "never fires between start_at and end_at"
			}
		}
	case ScheduleInterval:
		ev := time.Duration(d.Schedule.Every)
		if msg := CheckEvery(ev); msg != "" {
			fe["schedule.every"] = msg
		} else if plan := planOf(d, loc, nil, ""); d.EndAt != nil {
			if _, ok := plan.Next(now); !ok {
				plan.end = time.Time{}
				first, _ := plan.Next(now)
				fe["schedule.every"] = fmt.Sprintf("never fires between start_at and end_at: the first fire would be %s",
					first.Format(time.RFC3339))
			}
		}
	case ScheduleOnce:
		switch {
		case d.Schedule.At == nil:
			fe["schedule.at"] = "is required for a one-time schedule"
		case d.Schedule.At.Before(now.Add(-time.Minute)):
			fe["schedule.at"] = "is in the past"
		case d.StartAt != nil && d.Schedule.At.Before(*d.StartAt):
			fe["schedule.at"] = "is before start_at: it would never fire"
		case d.EndAt != nil && d.Schedule.At.After(*d.EndAt):
			fe["schedule.at"] = "is after end_at: it would never fire"
		}
	case "":
		fe["schedule.kind"] = "is required: cron, interval or once"
	default:
		fe["schedule.kind"] = fmt.Sprintf("%q is not cron, interval or once", d.Schedule.Kind)
	}
	switch a := d.Schedule.Align; {
	case a == "":
	case d.Schedule.Kind != ScheduleInterval:
		fe["schedule.align"] = "applies to interval schedules only (a cron schedule spreads with H, like H * * * *)"
	case a != AlignSpread && a != AlignEpoch:
		fe["schedule.align"] = fmt.Sprintf("%q is not spread or epoch", a)
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
		} else if len(v) > maxParamValue {
			fe["params"] = fmt.Sprintf("value of %q is longer than %d bytes", k, maxParamValue)
		}
	}
	switch {
	case d.Type == "":
		fe["type"] = "is required: one of " + strings.Join(TaskTypes(), ", ")
	case !slices.Contains(TaskTypes(), d.Type):
		fe["type"] = fmt.Sprintf("%q is not one of %s", d.Type, strings.Join(TaskTypes(), ", "))
	default:
		for _, other := range d.specsPresent() {
			if other != d.Type {
				fe[other] = "must be empty for a " + d.Type + " task"
			}
		}
		switch d.Type {
		case TaskHTTP:
			d.validateHTTP(fe)
		case TaskShell:
			d.validateShell(fe)
		default:
			if s := d.Spec(); s == nil {
				fe[d.Type] = "is required for a " + d.Type + " task"
			} else {
				s.validate(fe)
			}
		}
	}
	switch d.Overlap {
	case "", OverlapAllow, OverlapSkip, OverlapQueue: // "" is a definition Normalize has not seen: allow
	default:
		fe["overlap"] = fmt.Sprintf("%q is not allow, skip or queue", d.Overlap)
	}
	switch d.Misfire {
	case "", MisfireSkip, MisfireRunOnce: // "" is a definition Normalize has not seen: skip
	default:
		fe["misfire"] = fmt.Sprintf("%q is not skip or run_once", d.Misfire)
	}
	switch d.AtCapacity {
	case "", AtCapacityWait, AtCapacitySkip: // "" is a definition Normalize has not seen: wait
	default:
		fe["at_capacity"] = fmt.Sprintf("%q is not wait or skip", d.AtCapacity)
	}
	switch d.Routing {
	case "", RoutingWeighted, RoutingRoundRobin, RoutingFailover, RoutingLeastBusy, RoutingBroadcast:
	case RoutingHash:
		if _, ok := d.Params[d.RoutingKey]; d.RoutingKey == "" || !ok {
			fe["routing_key"] = "must name a param: hash routing uses its value"
		}
	default:
		fe["routing"] = fmt.Sprintf("%q is not weighted, round_robin, failover, least_busy, hash or broadcast", d.Routing)
	}
	d.validateText(fe)
	if len(fe) > 0 {
		return fe
	}
	return nil
}

// badText reports NUL bytes or invalid UTF-8, which no text field may hold.
func badText(s string) bool { return !utf8.ValidString(s) || strings.ContainsRune(s, 0) }

// validateText refuses NUL and invalid UTF-8 in every text field, naming it.
func (d *TaskDef) validateText(fe FieldErrors) {
	const msg = "holds a NUL byte or invalid UTF-8"
	check := func(field string, vals ...string) {
		for _, v := range vals {
			if badText(v) {
				fe[field] = msg
				return
			}
		}
	}
	check("id", d.ID)
	check("key", d.Key)
	check("title", d.Title)
	check("description", d.Description)
	check("schedule.cron", d.Schedule.Cron)
	for k, v := range d.Params {
		check("params", k, v)
	}
	check("secret_params", d.SecretParams...)
	if h := d.HTTP; h != nil {
		check("http.url", h.URL)
		check("http.body", h.Body)
		check("http.content_type", h.ContentType)
		check("http.method", h.Method)
		for k, v := range h.Headers {
			check("http.headers", k, v)
		}
		check("http.secret_headers", h.SecretHeaders...)
	}
	if s := d.Shell; s != nil {
		check("shell.command", s.Command)
		check("shell.args", s.Args...)
		check("shell.dir", s.Dir)
		for k, v := range s.Env {
			check("shell.env", k, v)
		}
	}
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
	if _, ok := fe["http.url"]; !ok {
		// Parameters may hold anything (newlines are fine in shell env);
		// what they are substituted into must still be a valid request.
		if x := ExpandParams(h.URL, d.Params); strings.ContainsAny(x, controlChars+" ") {
			fe["http.url"] = "holds a space, line break or NUL once {{KEY}} parameters are substituted"
		} else if u, err := url.Parse(x); err != nil || u.Host == "" {
			fe["http.url"] = "is not a valid URL once {{KEY}} parameters are substituted"
		}
	}
	if len(h.Headers) > maxHeaders {
		fe["http.headers"] = fmt.Sprintf("at most %d headers", maxHeaders)
	}
	for k, v := range h.Headers {
		switch {
		case !headerNameRE.MatchString(k):
			fe["http.headers"] = fmt.Sprintf("%q is not a valid header name", k)
		case len(v) > maxHeaderValue:
			fe["http.headers"] = fmt.Sprintf("value of %q is longer than %d KiB", k, maxHeaderValue>>10)
		case strings.ContainsAny(v, controlChars):
			fe["http.headers"] = fmt.Sprintf("value of %q has a line break or NUL", k)
		case strings.ContainsAny(ExpandParams(v, d.Params), controlChars):
			fe["http.headers"] = fmt.Sprintf("value of %q has a line break or NUL once {{KEY}} parameters are substituted", k)
		}
	}
	if len(h.Body) > maxBodyBytes {
		fe["http.body"] = fmt.Sprintf("is larger than %d KiB", maxBodyBytes>>10)
	}
	if strings.ContainsAny(h.ContentType, controlChars) {
		fe["http.content_type"] = "has a line break or NUL"
	} else if len(h.ContentType) > 256 {
		fe["http.content_type"] = "is longer than 256 characters"
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
	if len(s.Env) > maxParams {
		fe["shell.env"] = fmt.Sprintf("at most %d variables", maxParams)
	}
	for k, v := range s.Env {
		if !paramKeyRE.MatchString(k) {
			fe["shell.env"] = fmt.Sprintf("%q is not a valid variable name", k)
		} else if len(v) > 4096 {
			fe["shell.env"] = fmt.Sprintf("value of %q is longer than 4096 bytes", k)
		}
	}
}

// LiveNoticeAfter is how long a run lasts before its worker sends a start
// notice. Shorter runs, most of them, cost the master nothing extra.
const LiveNoticeAfter = time.Second

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
	Result      Result    `json:"result"`
	Attempt     int       `json:"attempt"`
	HTTPStatus  int       `json:"http_status"`
	ExitCode    *int      `json:"exit_code"`
	Output      string    `json:"output"`
	Manual      bool      `json:"manual"`
	// BinaryOutput says the output held NUL bytes or invalid UTF-8, which
	// were replaced by U+FFFD so it can be stored and shown safely.
	BinaryOutput bool `json:"binary_output,omitempty"`
	// Covers is, for a catch-up run (misfire policy run_once), how many
	// missed fires it stands for, the first at ScheduledAt; 0 for any other
	// run. The run's output says the same in its first line.
	Covers int `json:"covers,omitempty"`
	// TaskVersion is the version of the task's definition the run ran;
	// 0 when unknown (a delayed task, or a worker from before versions).
	TaskVersion int `json:"task_version,omitempty"`
	// WorkflowRun and WorkflowStep name the workflow run and step the run
	// is part of (RunOnceRequest.Workflow); empty for the others.
	WorkflowRun  string `json:"workflow_run,omitempty"`
	WorkflowStep string `json:"workflow_step,omitempty"`
}

// MaxCovers bounds RunReport.Covers: the missed fires one catch-up run may
// stand for (counting stops there: "or more").
const MaxCovers = 1_000_000

// Validate checks a report received by the master.
func (r *RunReport) Validate() error {
	switch {
	case r.ID == "" || len(r.ID) > 64:
		return fmt.Errorf("%w: run id must be 1-64 characters", ErrInvalid)
	case r.TaskID == "" || len(r.TaskID) > 64:
		return fmt.Errorf("%w: run %s: task id must be 1-64 characters", ErrInvalid, r.ID)
	case !r.Result.Reported():
		return fmt.Errorf("%w: run %s: result %q is not success, failed, timeout, skipped, killed or running", ErrInvalid, r.ID, r.Result)
	case r.Attempt < 1 || r.Attempt > MaxRetries+1:
		return fmt.Errorf("%w: run %s: attempt %d out of range", ErrInvalid, r.ID, r.Attempt)
	case len(r.WorkflowRun) > 36 || len(r.WorkflowStep) > 64 || (r.WorkflowRun == "") != (r.WorkflowStep == ""):
		return fmt.Errorf("%w: run %s: workflow_run (at most 36 bytes) and workflow_step (at most 64) go together", ErrInvalid, r.ID)
	case r.TaskVersion < 0:
		return fmt.Errorf("%w: run %s: task_version %d is negative", ErrInvalid, r.ID, r.TaskVersion)
	case r.Covers < 0 || r.Covers > MaxCovers:
		return fmt.Errorf("%w: run %s: covers %d out of range (0 to %d)", ErrInvalid, r.ID, r.Covers, MaxCovers)
	case len(r.Output) > MaxOutputBytes+1024:
		return fmt.Errorf("%w: run %s: output larger than %d bytes", ErrInvalid, r.ID, MaxOutputBytes)
	case r.StartedAt.IsZero() || (r.Result.Ended() && r.EndedAt.Before(r.StartedAt)):
		return fmt.Errorf("%w: run %s: started_at/ended_at missing or reversed", ErrInvalid, r.ID)
	case !r.Result.Ended() && !r.EndedAt.IsZero():
		return fmt.Errorf("%w: run %s: a run in progress has no ended_at", ErrInvalid, r.ID)
	}
	return nil
}

// Paths of a run in progress on a worker: its output so far, and kill.
const (
	PathRunOutput = "/api/run/output"
	PathRunKill   = "/api/run/kill"
)

// ErrRunNotInProgress is the error message of a worker's 404 to
// PathRunOutput or PathRunKill when the run is not in progress there. Only
// this message means the run ended: any other 404 (a worker too old for these
// paths, or something else answering at its address) says nothing about it.
const ErrRunNotInProgress = "no such run in progress on this node"

// RunRef is the body of PathRunOutput and PathRunKill: a run id and, for a
// kill, who asked (written into the run's output).
type RunRef struct {
	ID string `json:"id"`
	By string `json:"by,omitempty"`
}

// RunProgress answers PathRunOutput: a run in progress and the tail of its
// output so far (at most MaxOutputBytes). A worker answers 404 when the run
// is not in progress there (it ended, or never ran there).
type RunProgress struct {
	ID        string    `json:"id"`
	TaskID    string    `json:"task_id"`
	Attempt   int       `json:"attempt"`
	StartedAt time.Time `json:"started_at"`
	// Output is the output so far: a shell command's stdout and stderr; an
	// HTTP task has none until its answer arrives, and Waiting says so.
	Output       string `json:"output"`
	BinaryOutput bool   `json:"binary_output,omitempty"`
	// OutputBytes counts every byte written so far, including those the
	// tail no longer holds.
	OutputBytes int64  `json:"output_bytes"`
	Waiting     string `json:"waiting,omitempty"`
	// Killing: a kill was asked and the run is ending.
	Killing bool `json:"killing,omitempty"`
}

// Bounds of one run-report batch (POST /api/worker/runs), enforced by the
// master while it reads the body and kept by the worker when it makes one.
// A run's output is at most MaxOutputBytes; JSON escapes a byte into at most
// six (\u001f), so one report is at most MaxRunReportBytes (about 390 KiB)
// and a batch always holds ten reports of maximum size.
const (
	MaxRunsPerBatch   = 1000
	MaxRunsBatchBytes = 4 << 20
	MaxRunReportBytes = 6*(MaxOutputBytes+1024) + 4<<10
)

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

// ClaimRequest is the body of POST /api/worker/claim (formerly /api/worker/lock):
// an executor's claim of one fire.
type ClaimRequest struct {
	TaskID string    `json:"task_id"`
	FireAt time.Time `json:"fire_at"`
	// RunID is the report id the fire's first report will carry if this
	// node wins it. The master keeps it with the claim, so that a winner
	// that dies before it reports (kill -9 during a run too short for a
	// start notice) leaves a run recorded lost under that id, which its
	// report replaces should it come after all. Empty from older workers.
	RunID string `json:"run_id,omitempty"`
}

// ClaimResponse says whether this node won the fire, and which node did.
type ClaimResponse struct {
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
	// CatchUp, when the master sends a catch-up run (misfire policy
	// run_once), is what it stands for: its reports carry the count.
	CatchUp *CatchUp `json:"catch_up,omitempty"`
	// Workflow, for a step of a workflow run, is what the run is part of;
	// Task then carries the definition to run.
	Workflow *WorkflowRef `json:"workflow,omitempty"`
}

// WorkflowRef places a run in a workflow run: the step it is, the id its
// first attempt must have, the run's logical time and the params the step
// gives the task.
type WorkflowRef struct {
	Run  string `json:"run"`
	Step string `json:"step"`
	// RunID is the id of the step's first attempt, chosen by the master
	// that dispatched it: a worker that already started a run of this id
	// does not start another (a master sending it again after a crash).
	RunID string `json:"run_id"`
	// Params are added to the task's params for this run (a step's own,
	// its parents' results, WORKFLOW_TIME and WORKFLOW_RUN_ID).
	Params map[string]string `json:"params,omitempty"`
}

// Validate checks a workflow reference a worker received.
func (w *WorkflowRef) Validate() error {
	switch {
	case w.Run == "" || len(w.Run) > 36:
		return fmt.Errorf("%w: workflow run id must be 1-36 characters", ErrInvalid)
	case w.Step == "" || len(w.Step) > 64:
		return fmt.Errorf("%w: workflow step name must be 1-64 characters", ErrInvalid)
	case len(w.Params) > maxParams:
		return fmt.Errorf("%w: at most %d workflow params", ErrInvalid, maxParams)
	}
	for k, v := range w.Params {
		if !paramKeyRE.MatchString(k) || len(v) > maxParamValue {
			return fmt.Errorf("%w: workflow param %q: a name of letters, digits and _ and a value of at most %d bytes", ErrInvalid, k, maxParamValue)
		}
	}
	return nil
}

// RunOnceBatchRequest is the body of POST /api/task/runonce/batch: at most
// MaxRunOnceBatch runs, each as POST /api/task/runonce takes it.
type RunOnceBatchRequest struct {
	Runs []RunOnceRequest `json:"runs"`
}

// RunOnceBatchReply answers a batch run by run, in its order.
type RunOnceBatchReply struct {
	Results []RunOnceResult `json:"results"`
}

// RunOnceResult is one run of a batch: started, or refused with the status
// and error POST /api/task/runonce would have answered.
type RunOnceResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"` // 202: started
	Error  string `json:"error,omitempty"`
}

// CatchUp is what a catch-up run stands for: Fires missed fires from First
// to Last.
type CatchUp struct {
	Fires int       `json:"fires"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// More says the count stopped at its bound: there were more.
	More bool `json:"more,omitempty"`
}

// Validate checks a catch-up as a worker receives it: at least one missed
// fire, at most MaxCovers, the last not before the first.
func (c *CatchUp) Validate() error {
	if c.Fires < 1 || c.Fires > MaxCovers || c.First.IsZero() || c.Last.Before(c.First) {
		return fmt.Errorf("%w: catch_up must name 1 to %d missed fires, first before last", ErrInvalid, MaxCovers)
	}
	return nil
}

// ExpandParams replaces {{KEY}} placeholders with parameter values.
func ExpandParams(s string, params map[string]string) string {
	if len(params) == 0 || !strings.Contains(s, "{{") {
		return s
	}
	for k, v := range params {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	return s
}

// CatchUpLine is the first line of a catch-up run's output: the missed
// fires it stands for. more says the count stopped at its bound.
func CatchUpLine(n int, first, last time.Time, more bool) string {
	switch {
	case more:
		return fmt.Sprintf("catch-up run (misfire policy run_once) for %d or more missed fires from %s", n, first.UTC().Format(time.RFC3339))
	case n == 1:
		return fmt.Sprintf("catch-up run (misfire policy run_once) for the missed fire at %s", first.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("catch-up run (misfire policy run_once) for %d missed fires from %s to %s", n, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
}
