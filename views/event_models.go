package views

// EventRow is one line of the event log.
type EventRow struct {
	ID          int64
	At          string // "2026-11-22 10:00:00 UTC"
	AtISO       string // RFC 3339, for the <time> element
	Ago         string // "3m ago"
	Actor       string
	ActorURL    string // the log filtered by this actor
	Action      string
	TargetType  string
	Target      string
	TargetTitle string // a task's title, when known
	TargetName  string // how the target is shown: a task's title, else the target
	Meaning     string // good, warn, bad, info: the row's colour
	OutcomeText string // the badge: ok, error, offline, recovered
	TargetURL   string // the log filtered by this target
	ObjectURL   string // the node's or task's own page, when there is one
	Outcome     string // ok, error
	Detail      string
	Master      string // the master that recorded it, when known
}

// EventFilterVM is the filter form of the event log, as typed.
type EventFilterVM struct {
	Actor      string
	Action     string // prefix
	TargetType string
	Target     string
	Outcome    string
	From       string // datetime-local, UTC
	To         string
}

// EventsVM is the event log page.
type EventsVM struct {
	Layout      LayoutVM
	Filter      EventFilterVM
	Filtered    bool              // a filter is set (changes the empty-state text)
	Errors      map[string]string // field -> message, for a refused filter
	Actions     []string          // suggestions for the action filter
	TargetTypes []string
	Rows        []EventRow
	Total       int
	First, Last int    // 1-based range shown
	PrevURL     string // "" on the first page
	NextURL     string // "" on the last page
}

// DashboardVM is the dashboard page.
type DashboardVM struct {
	Layout LayoutVM
	Live   DashboardLiveVM
	Chart  ChartVM
	// Range is the chart's time range (1h, 24h, 14d), one of Ranges.
	Range  string
	Ranges []string
}

// DashboardLiveVM is the part of the dashboard that refreshes itself.
type DashboardLiveVM struct {
	PollInterval string // htmx trigger, e.g. "every 5s"
	UpdatedAt    string // when these numbers were read, UTC
	Nodes        [3]int // offline, idle, running
	NodesTotal   int
	Tasks        [3]int // stopped, running, paused
	TasksTotal   int
	// NoExecutor counts the running tasks none of whose executors is running.
	NoExecutor int
	Today      string // the UTC day, 2006-01-02
	RunsToday  RunCounts
	// FailureGroups is the failures of the last 24 hours by task (delayed
	// tasks by topic), the newest first; FailuresComplete is false when
	// there were too many to count them all (the counts are then "at least").
	FailureGroups    []FailureGroupRow
	FailuresComplete bool
}

// FailureGroupRow is the failures of one task, or of one delayed topic.
type FailureGroupRow struct {
	TaskID  string // the task; for a delayed topic, the latest failed delayed task
	Title   string
	Delayed bool
	Topic   string
	// TopicURL is the delayed list filtered to the topic.
	TopicURL   string
	ContentKey string
	Count      int
	LastRunID  string
	Node       string
	Last       string // relative
	LastAt     string // absolute, UTC
	Result     string
	Code       string
	LastError  string // the first line of the latest failure's output
	// RunsURL is the runs page filtered to the group's failures.
	RunsURL string
}

// RunCounts counts runs by result.
type RunCounts struct {
	Success, Failed, Timeout, Skipped, Total int
}

// ChartVM is the runs-per-day bar chart, with every coordinate computed.
type ChartVM struct {
	ViewBox  string
	Width    string
	Height   string
	Title    string
	Desc     string
	AxisX1   string // the baseline, from AxisX1 to AxisX2 at AxisY
	AxisX2   string
	AxisY    string
	Ticks    []ChartTick
	Days     []ChartDay
	MaxValue int
	Empty    bool // no run in the whole range
	// EmptyText says there was no run in the range.
	EmptyText string
}

// ChartTick is one horizontal grid line of the value axis and its label.
type ChartTick struct {
	Y      string
	LabelX string
	LabelY string
	Label  string
}

// ChartDay is one day's bar group: success at the bottom, failed and timed
// out on top, a transparent hit area for the tooltip.
type ChartDay struct {
	Day     string // 2006-01-02
	Label   string // 11-22
	Tooltip string
	Counts  RunCounts
	Hit     ChartRect
	Success ChartRect // zero H: not drawn
	Failed  ChartRect
	LabelX  string
	LabelY  string
}

// ChartRect is an SVG rectangle.
type ChartRect struct {
	X, Y, W, H string
	Draw       bool
}
