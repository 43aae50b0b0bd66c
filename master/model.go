// The engine's vocabulary: the records and the named values its operations
// take and return. They are stored by package store and named here so that
// the layers above the engine (handlers, views, cmd) speak to the engine
// only and never import the store.

package master

import "github.com/schedulemaster-go/schedulemaster/store"

// Records the engine returns.
type (
	// Node is a master or worker node as stored.
	Node = store.Node
	// NodeStatus is a node's state: offline, idle or running.
	NodeStatus = store.NodeStatus
	// Run is one run of a task.
	Run = store.Run
	// User is a console user.
	User = store.User
	// APIToken is an API token; only its hash is kept.
	APIToken = store.APIToken
	// Event is one entry of the event log.
	Event = store.Event
	// HealthSample is one probe of a node's health.
	HealthSample = store.HealthSample
	// DayCount is the number of runs of each outcome on one day.
	DayCount = store.DayCount
	// TaskStatus is a task's state: stopped, running or paused.
	TaskStatus = store.TaskStatus
)

// Filters the list operations take.
type (
	// TaskFilter selects and pages tasks.
	TaskFilter = store.TaskFilter
	// RunFilter selects and pages runs.
	RunFilter = store.RunFilter
	// EventFilter selects and pages events.
	EventFilter = store.EventFilter
	// DelayedFilter selects and pages delayed tasks.
	DelayedFilter = store.DelayedFilter
)

// Cursor is where a keyset page of a list starts (see store.Cursor).
type Cursor = store.Cursor

// ParseCursor reads a cursor a previous page answered with.
func ParseCursor(s string) (Cursor, error) {
	c, err := store.ParseCursor(s)
	if err != nil {
		return c, Errorf(KindInvalid, "after must be the next cursor a previous page answered with")
	}
	return c, nil
}

// Roles of users.
const (
	RoleAdmin  = store.RoleAdmin
	RoleViewer = store.RoleViewer
)

// Kinds, modes and states of nodes.
const (
	TypeMaster    = store.TypeMaster
	TypeWorker    = store.TypeWorker
	ModeAuto      = store.ModeAuto
	ModeManual    = store.ModeManual
	ModePending   = store.ModePending
	StatusOffline = store.StatusOffline
	StatusIdle    = store.StatusIdle
	StatusRunning = store.StatusRunning
)

// States of tasks.
const (
	TaskStopped = store.TaskStopped
	TaskRunning = store.TaskRunning
	TaskPaused  = store.TaskPaused
)

// Outcomes of runs, as stored.
const (
	ResultRunning = store.ResultRunning
	ResultSuccess = store.ResultSuccess
	ResultFailed  = store.ResultFailed
	ResultTimeout = store.ResultTimeout
	ResultSkipped = store.ResultSkipped
)

// OutputPreviewChars is how much of a run's output lists show.
const OutputPreviewChars = store.OutputPreviewChars

// Delayed tasks: the pending state, every state, and the bounds of the
// fields a list may be filtered by.
const (
	DelayedPending      = store.DelayedPending
	MaxDelayedTopic     = store.MaxDelayedTopic
	MaxDelayedSourceApp = store.MaxDelayedSourceApp
)

// DelayedStatuses lists the states of a delayed task, in display order.
func DelayedStatuses() []string { return append([]string(nil), store.DelayedStatuses...) }

// Event log targets and outcomes.
const (
	TargetNode     = store.TargetNode
	TargetTask     = store.TargetTask
	TargetUser     = store.TargetUser
	TargetToken    = store.TargetToken
	TargetSettings = store.TargetSettings
	TargetDelayed  = store.TargetDelayed
	TargetWorkflow = store.TargetWorkflow
	OutcomeOK      = store.OutcomeOK
	OutcomeError   = store.OutcomeError
)

// Stored names of the settings the console pins or shows.
const (
	SettingHealthInterval = store.SettingHealthInterval
	SettingHealthTimeout  = store.SettingHealthTimeout
	SettingMaxFailures    = store.SettingMaxFailures
)
