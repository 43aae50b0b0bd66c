package views

// WorkflowsVM is the Workflows page: the workflows one may read.
type WorkflowsVM struct {
	Layout LayoutVM
	Flash  *Flash
	Items  []WorkflowRow
	// Query is the search (title or key); QueryError what is wrong with it.
	Query, QueryError string
}

// WorkflowRow is one workflow in the list.
type WorkflowRow struct {
	ID, Title, Key, Project string
	Steps                   int
	Updated                 string
	// NextFire is the schedule's next fire ("" for none); Manual says it
	// has no schedule; Paused that its schedule is paused.
	NextFire       string
	Manual, Paused bool
	// LastRunID, LastRunStatus and LastRunAt name its latest run ("" for
	// none).
	LastRunID, LastRunStatus, LastRunAt string
}

// WorkflowVM is one workflow's page: its steps, their graph and its runs.
type WorkflowVM struct {
	Layout  LayoutVM
	Flash   *Flash
	ID      string
	Title   string
	Key     string
	Project string
	Version int
	Steps   []WorkflowStepRow
	Graph   DAG
	Runs    []WorkflowRunRow
	// Timeout bounds a run ("" for none); Params are the workflow's.
	Timeout  string
	Params   []KV
	Schedule WorkflowScheduleVM
	// CanRun offers Run now, Pause, Resume and Backfill (project
	// operators); CanEdit offers Edit and Delete (project editors).
	CanRun, CanEdit bool
	// Backfill is the backfill form (a scheduled workflow, operators), its
	// zone the one its times are read in; BackfillErrors its refused
	// fields.
	Backfill       BackfillFields
	BackfillZone   string
	BackfillErrors map[string]string
	BackfillError  string
	Backfills      []BackfillRow
}

// WorkflowStepRow is one step of a definition.
type WorkflowStepRow struct {
	Name      string
	TaskID    string
	TaskTitle string // "" when the task is gone
	// After lists what it waits for: "extract", "load (failure)".
	After []string
}

// WorkflowRunRow is one run in a workflow's list of runs.
type WorkflowRunRow struct {
	ID, Status, LogicalTime, StartedAt, EndedAt, Trigger, StartedBy string
	// Note says why a run was skipped or queued, or which fires it
	// stands for.
	Note string
}

// WorkflowRunVM is one workflow run's page. Its live part polls LiveURL
// every second while the run is in progress.
type WorkflowRunVM struct {
	Layout      LayoutVM
	Flash       *Flash
	ID          string
	WorkflowID  string
	Title       string
	Status      string
	LogicalTime string
	StartedAt   string
	EndedAt     string
	StartedBy   string
	Trigger     string
	RerunOf     string
	// Note says why the run was skipped or queued, or which fires it
	// stands for; BackfillID names the backfill that made it.
	Note       string
	BackfillID string
	// TaskID and TaskTitle name the task of a run of no workflow (a
	// task's backfill): the page leads back to it.
	TaskID, TaskTitle string
	Steps             []StepRunRow
	Graph             DAG
	InProgress        bool
	LiveURL           string
	// CanCancel and CanRerun offer Cancel (a run in progress) and Rerun
	// failed (an ended run that did not succeed) to project operators.
	CanCancel bool
	CanRerun  bool
}

// StepRunRow is one step of a workflow run.
type StepRunRow struct {
	Name, State, TaskID, Run, Node string
	Attempt                        int
	StartedAt, EndedAt             string
}

// WorkflowFormVM is the form that defines a workflow (new or edit), every
// field as it was typed.
type WorkflowFormVM struct {
	Layout LayoutVM
	Edit   bool
	ID     string
	// SavedTitle is the title of the workflow being edited, as saved.
	SavedTitle string
	WorkflowFields
	// Projects are those one may define workflows in (a new workflow
	// only); Tasks the tasks of the chosen project its steps may run.
	Projects []string
	Tasks    []TaskOption
	Zones    []string

	Errors      map[string]string // field ("steps[2].task") -> message
	OtherErrors []string          // errors of fields the form has no place for
	// FormError is a refusal not about a field; Conflict says another save
	// came first (the form keeps what was typed, and saving again saves
	// over it).
	FormError, Conflict string
	// Focus is the id of the control that takes the focus after the form
	// changed its rows (Add step, Remove): where the change is.
	Focus string
}

// WorkflowFields are the workflow form's values as typed.
type WorkflowFields struct {
	Project, Title, Key, Version                                   string
	ScheduleKind, Cron, Every, Align, At, StartAt, EndAt, Timezone string
	Overlap, Misfire, Timeout, Params                              string
	Steps                                                          []StepFields
}

// StepFields are one step's row of the workflow form as typed.
type StepFields struct {
	Name, Task, Params, Timeout string
	After                       []EdgeFields
}

// EdgeFields are one "waits for" of a step: the parent's name and the
// outcome of it that lets the step run (success, failure, always).
type EdgeFields struct{ Step, On string }

// BackfillFields are the backfill form of a workflow's page as typed: the
// window's ends as datetime-local values in the workflow's zone.
type BackfillFields struct {
	From, To, MaxConcurrent, Order, Params string
}

// WorkflowScheduleVM is what a workflow's page says of its schedule.
type WorkflowScheduleVM struct {
	// Text is the schedule ("cron 0 3 * * *", "every 1h"), "" for a
	// workflow run by hand only.
	Text, Zone, Window string
	Overlap, Misfire   string
	// NextFire is the next fire in the workflow's zone and in UTC; "" for
	// none.
	NextFire, NextFireUTC string
	Paused                bool
}

// BackfillRow is one backfill in a workflow's list of backfills.
type BackfillRow struct {
	ID, State, Window, CreatedAt, CreatedBy string
	Total, Ended                            int
}

// BackfillVM is a backfill's page: its window, state and progress, and its
// runs. Its live part polls LiveURL while the backfill is running.
type BackfillVM struct {
	Layout LayoutVM
	Flash  *Flash
	ID     string
	Title  string
	// WorkflowID or TaskID is what it runs (a workflow, or one task).
	WorkflowID, TaskID string
	State              string
	// From and To are the window's ends in the zone of what it runs.
	From, To           string
	MaxConcurrent      int
	Order              string
	CreatedBy          string
	CreatedAt, EndedAt string
	Total, Ended       int
	// Progress counts its runs by status, in a fixed order.
	Progress []StatusCount
	Runs     []WorkflowRunRow
	// RunsCut says more runs exist than are listed.
	RunsCut bool
	// LiveURL and Poll are where and how often the live part refreshes
	// ("" while the backfill is not running).
	LiveURL, Poll string
	// CanPause, CanResume and CanCancel offer the actions to project
	// operators in the states that allow them.
	CanPause, CanResume, CanCancel bool
}

// StatusCount is how many runs have one status.
type StatusCount struct {
	Status string
	N      int
}

// BackfillFormVM is a backfill form: where it posts, its hint (a message
// id given Zone), the zone its times are read in, and what was typed with
// the engine's errors.
type BackfillFormVM struct {
	Action, Hint, Zone string
	Fields             BackfillFields
	Errors             map[string]string
	Error              string
}
