package views

import (
	"context"
	"strings"
)

// TaskActions says which actions a task's status allows.
type TaskActions struct {
	Start   bool
	Stop    bool
	Pause   bool
	Resume  bool
	RunOnce bool
	Edit    bool
	Delete  bool
}

// TaskRow is one line of the task list.
type TaskRow struct {
	ID         string
	Title      string
	Type       string
	Schedule   string // e.g. "cron */5 * * * * *", "every 2s"
	Executors  string // comma-separated node names, and the selector
	Status     int
	StatusName string
	LastRun    string // relative, e.g. "3s ago", or "never"
	LastRunAt  string // RFC 3339, for the title
	LastResult string // success, failed, timeout, skipped or ""
	NextRun    string // relative, e.g. "in 2s", or "-"
	NextRunAt  string // RFC 3339, for the title
	RunCount   int64
	Actions    TaskActions
	// NoExecutor: the task is running but none of its executors is, so its
	// fires cannot run; NoExecutorSince says since when (UTC, "" if unknown).
	NoExecutor      bool
	NoExecutorSince string
	// ScheduleZone is a cron's time zone, "" for UTC.
	ScheduleZone string
	// Failing: its latest runs failed in a row; FailingTitle says how many.
	// HealthTitle sums up its last runs for the run count's tooltip.
	Failing      bool
	FailingTitle string
	HealthTitle  string
}

// TaskFilterVM is the filter form of the task list, as typed.
type TaskFilterVM struct {
	Status string // "", "0", "1", "2"
	Title  string
	Node   string
}

// TasksVM is the task list page.
type TasksVM struct {
	Layout       LayoutVM
	Flash        *Flash
	Rows         []TaskRow
	Filter       TaskFilterVM
	Filtered     bool     // a filter is set (changes the empty-state text)
	Nodes        []string // worker names for the node filter
	Total        int
	Capped       bool   // Total is where counting stopped: there are more
	From, To     int    // 1-based range shown
	PrevURL      string // "" when on the first page
	NextURL      string // "" when on the last page
	RowsURL      string // the live fragment with the same filters
	ActionQuery  string // "?status=…" kept on action posts, so the answer keeps the filters
	PollInterval string // htmx trigger, e.g. "every 2s"
	ShowActions  bool
}

// NodeOption is a worker offered as an executor.
type NodeOption struct {
	Name       string
	StatusName string
	Checked    bool
}

// TaskOption is a task offered as a child.
type TaskOption struct {
	ID      string
	Title   string
	Checked bool
}

// TaskFormVM is the create/edit task form; every field as the user typed it.
type TaskFormVM struct {
	Layout LayoutVM
	Edit   bool
	ID     string
	// Locked is why the task cannot be edited now (not stopped); the form is not shown.
	Locked string
	// Conflict says another save came first (the form keeps what was
	// typed, and saving again saves over it); ConflictDiff links what it
	// changed.
	Conflict, ConflictDiff string
	// CloneOf is the task a new task copies (its masked secrets stand for
	// that task's values), CloneOfTitle its title; "" for a plain new task.
	CloneOf, CloneOfTitle string

	TaskFields
	Executors []NodeOption
	Children  []TaskOption
	// Connections are those the task's project sees whose kind fits the
	// chosen type (the types beyond HTTP and shell).
	Connections []ConnOption

	Errors      map[string]string // field ("schedule.cron") -> message
	OtherErrors []string          // errors of fields the form has no place for
	FormError   string

	// Zones are the time zone names the zone field suggests.
	Zones []string
}

// chosenType is the type the form's select shows chosen: http for a new
// form without one.
func (vm TaskFormVM) chosenType() string {
	if vm.Type == "" {
		return "http"
	}
	return vm.Type
}

// foldState is "error" when one of the fields has an error, "" otherwise.
func (vm TaskFormVM) foldState(fields ...string) string {
	for _, f := range fields {
		if vm.Errors[f] != "" {
			return "error"
		}
	}
	return ""
}

// changedRetries: the timeout or the retries differ from a new task's.
func (vm TaskFormVM) changedRetries() bool {
	return notDefault(vm.Timeout, "30s") || notDefault(vm.Retries, "0")
}

// changedRouting: routing or what a full worker does differ from the default.
func (vm TaskFormVM) changedRouting() bool {
	return notDefault(vm.Routing, "weighted") || vm.RoutingKey != "" || notDefault(vm.AtCapacity, "wait")
}

// changedOverlap: the overlap or the misfire policy differ from the default.
func (vm TaskFormVM) changedOverlap() bool {
	return notDefault(vm.Overlap, "allow") || notDefault(vm.Misfire, "skip")
}

// changedChildren: some child task is checked.
func (vm TaskFormVM) changedChildren() bool {
	for _, c := range vm.Children {
		if c.Checked {
			return true
		}
	}
	return false
}

// notDefault: v is set and is not def.
func notDefault(v, def string) bool {
	v = strings.TrimSpace(v)
	return v != "" && v != def
}

// foldMark says why a folded section is open, for tests and styles:
// "error", "changed" or "default".
func foldMark(state string, changed bool) string {
	switch {
	case state == "error":
		return "error"
	case changed:
		return "changed"
	}
	return "default"
}

// TaskFields are the task form's values as typed (times as datetime-local
// text in the task's zone), shown back as they were when the form has errors.
type TaskFields struct {
	Title        string
	Description  string
	Type         string // one of protocol.TaskTypes
	ScheduleKind string // cron, interval, once
	Cron         string
	Every        string
	At           string // datetime-local, UTC
	StartAt      string
	EndAt        string
	Timeout      string
	Retries      string
	Params       string // KEY=value lines
	SecretParams string // comma-separated names of params shown masked
	Keepers      string // comma-separated

	HTTPMethod      string
	HTTPURL         string
	HTTPHeaders     string // "Name: value" lines
	SecretHeaders   string // comma-separated names of headers shown masked
	HTTPBody        string
	HTTPContentType string

	ShellCommand string
	ShellArgs    string // one per line
	ShellEnv     string // KEY=value lines
	ShellDir     string

	// TypeFields are the fields of the types beyond HTTP and shell.
	TypeFields

	// Version is the version an edit started from (hidden); Note says why,
	// for the version the save makes.
	Version string
	Note    string

	// Selector is the task's label selector: the workers it selects are
	// executors too.
	Selector string

	// Timezone is the task's IANA zone ("" is UTC): its cron expression and
	// the form's times read the wall clock there.
	Timezone string

	// Overlap is the task's overlap policy: allow, skip or queue ("" is allow).
	Overlap string

	// Routing is the task's routing strategy ("" is weighted) and RoutingKey
	// the param hash routing uses.
	Routing, RoutingKey string

	// Misfire is the task's misfire policy: skip or run_once ("" is skip).
	Misfire string

	// Align is an interval's alignment: spread or epoch ("" is spread for a
	// new task, the stored one for an edit).
	Align string

	// AtCapacity is what a fire does on a full worker: wait or skip ("" is wait).
	AtCapacity string
}

// KV is one key/value line of a definition.
type KV struct {
	Key   string
	Value string
}

// TaskLink names another task.
type TaskLink struct {
	ID    string
	Title string
}

// TaskHTTPView is an HTTP task's request.
type TaskHTTPView struct {
	Method      string
	URL         string
	Headers     []KV
	Body        string
	ContentType string
}

// TaskShellView is a shell task's command.
type TaskShellView struct {
	Command string
	Args    []string
	Env     []KV
	Dir     string
}

// TaskSpecView is what a task page shows of a type beyond HTTP and shell:
// what it reaches, through which connection, with what.
type TaskSpecView struct {
	// Target is the subject, exchange and routing key, topic, key, the
	// statement's first line or the method.
	Target string
	// Connection is the connection's name; ConnectionID its page, "" when
	// the task's project sees no such connection.
	Connection, ConnectionID string
	// Details are the other settings (mode, QoS, ...), Body the payload,
	// statement or request and BodyLabel its name.
	Details         []KV
	Body, BodyLabel string
}

// RunRow is one line of a task's runs table.
type RunRow struct {
	ID          string
	StartedAt   string // UTC
	Started     string // relative
	Node        string
	ScheduledAt string // UTC
	Duration    string
	Result      string
	Attempt     int
	Code        string // "HTTP 200", "exit 1" or ""
	Manual      bool
}

// RunsVM is a page of a task's runs, the live fragment of the task page.
type RunsVM struct {
	TaskID       string
	Rows         []RunRow
	Total        int
	Capped       bool // Total is where counting stopped: there are more
	From, To     int
	PrevURL      string
	NextURL      string
	RowsURL      string
	PollInterval string
	// Result filters the runs by result ("" any); Results are its choices and
	// FilterURL the fragment the filter asks for.
	Result    string
	Results   []string
	FilterURL string
	// Live counters of the task.
	StatusName string
	// RunCount is every stored run of the task, those in progress
	// (Running of them) included: what the table lists unfiltered.
	RunCount   int64
	Running    int
	LastRun    string
	LastResult string
	NextRun    string
}

// TaskVM is the task detail page.
type TaskVM struct {
	// CanClone: the user may create tasks in the task's project.
	CanClone bool
	// CanBackfill: the user may backfill the task (an operator), whose
	// schedule's zone is BackfillZone; Backfills are its latest.
	CanBackfill  bool
	BackfillZone string
	Backfills    []BackfillRow
	// Version is the number of the task's definition in force.
	Version     int
	Layout      LayoutVM
	Flash       *Flash
	ID          string
	Title       string
	Description string
	Type        string
	Schedule    string
	Status      int
	StatusName  string
	Window      string // start/end window, "" when none
	Timeout     string
	Retries     int
	Overlap     string // allow, skip or queue
	Routing     string // the routing strategy, "hash by KEY" for hash
	Misfire     string // skip or run_once
	AtCapacity  string // wait or skip
	Params      []KV
	Executors   []string
	// Selector is its label selector ("" for none); Selected the workers it
	// selects now, with their state.
	Selector string
	Selected []NodeOption
	Keepers  []string
	Children []TaskLink
	HTTP     *TaskHTTPView
	Shell    *TaskShellView
	// Spec is the definition of a type beyond HTTP and shell, nil for those.
	Spec        *TaskSpecView
	LastRun     string
	LastRunAt   string
	LastResult  string
	NextRun     string
	NextRunAt   string
	RunCount    int64
	CreatedBy   string
	CreatedAt   string
	UpdatedAt   string
	Actions     TaskActions
	ActionQuery string
	ShowActions bool
	Runs        RunsVM
	// NoExecutor: the task is running but none of its executors is, so its
	// fires cannot run; NoExecutorSince says since when (UTC, "" if unknown).
	NoExecutor      bool
	NoExecutorSince string
	// ScheduleZone is a cron's time zone, "" for UTC.
	ScheduleZone string
	// Health is how its last runs went, with their duration chart.
	Health TaskHealthVM
}

// RunVM is the run detail page.
type RunVM struct {
	Layout      LayoutVM
	ID          string
	TaskID      string
	TaskTitle   string // "" when the task is gone
	Node        string
	ScheduledAt string
	StartedAt   string
	EndedAt     string
	Duration    string
	Result      string
	Attempt     int
	HTTPStatus  string
	ExitCode    string
	Manual      bool
	Output      string
	// BinaryOutput: the output held NUL or invalid UTF-8, shown as U+FFFD.
	BinaryOutput bool
	// Heading names the run by its task and start: "backup · run of 2026-…".
	Heading string
	// DelayedID names the delayed task of a run of one.
	DelayedID string
	// TaskVersion is the version of the task's definition the run ran; 0
	// when unknown.
	TaskVersion int
	// InProgress: the run is still going; its part of the page polls
	// LiveURL every second for its output so far.
	InProgress bool
	LiveURL    string
	// LiveNote says where the output shown comes from while it runs: bytes
	// so far, what an HTTP run waits for, or why its worker cannot say.
	LiveNote string
	// CanKill shows the Kill button (admins, runs in progress).
	CanKill bool
	Flash   *Flash
}

// SchedulePreviewVM is the task form's preview of a schedule's next fires.
type SchedulePreviewVM struct {
	Zone   string        // the zone the fires are shown in
	Fires  []PreviewFire // the next fires, at most five
	Errors []string      // what is wrong with the schedule ("schedule.cron: ...")
	// ZoneLabel names the zone the form's times are read in, for its labels.
	ZoneLabel string
	// Blank: the schedule's own field is still empty; nothing to complain of.
	Blank bool
	// Note says how the task's own offset places the fires (a spread
	// interval, a cron with H), or that it is picked when the task is saved.
	Note string
}

// PreviewFire is one upcoming fire, in the task's zone and in UTC.
type PreviewFire struct {
	Local string
	UTC   string
}

// SelectorPreviewVM is what a selector matches now, for the task form.
type SelectorPreviewVM struct {
	// Blank: no selector typed yet.
	Blank bool
	// Error says what is wrong with the selector, pointing at the character.
	Error string
	// Selector is the canonical spelling.
	Selector string
	// Running and Others are the first names of the running workers it
	// matches and of those that do not run now; More* count the rest.
	Running, Others           []string
	MoreRunning, MoreOthers   int
	RunningCount, OthersCount int
}

// MatchText reads "matches 2 running nodes: a, b".
func (vm SelectorPreviewVM) MatchText(ctx context.Context) string {
	if vm.RunningCount == 0 {
		return Tn(ctx, "SelectorMatchesNone", 0)
	}
	return Tn(ctx, "SelectorMatches", vm.RunningCount, "Names", nameList(ctx, vm.Running, vm.MoreRunning))
}

// OthersText reads "and 1 node not running now: c".
func (vm SelectorPreviewVM) OthersText(ctx context.Context) string {
	return Tn(ctx, "SelectorOthers", vm.OthersCount, "Names", nameList(ctx, vm.Others, vm.MoreOthers))
}

// nameList joins names, "and 3 more" when some are left out.
func nameList(ctx context.Context, names []string, more int) string {
	s := strings.Join(names, T(ctx, "ListSep"))
	if more > 0 {
		s += " " + T(ctx, "BulkMore", "Count", more)
	}
	return s
}
