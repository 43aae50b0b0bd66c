package views

import (
	"context"
	"time"

	"github.com/a-h/templ"

	"github.com/schedulemaster-go/schedulemaster/locale"
)

// T renders catalog message id in the reader's language (the localizer the
// request's context carries); kv are the template's name/value pairs.
func T(ctx context.Context, id string, kv ...any) string { return locale.From(ctx).T(id, kv...) }

// Tn renders the plural form of message id for n ({{.Count}} in the text).
func Tn(ctx context.Context, id string, n int, kv ...any) string {
	return locale.From(ctx).N(id, n, kv...)
}

// Lang is the reader's language, the value of <html lang>.
func Lang(ctx context.Context) string { return locale.From(ctx).Lang() }

// Dur writes a duration in the reader's language.
func Dur(ctx context.Context, d time.Duration) string { return locale.From(ctx).Duration(d) }

// langSwitchLabel names a language in itself, so a reader finds theirs.
func langSwitchLabel(lang string) string {
	if lang == locale.ZH {
		return "中文"
	}
	return "English"
}

// scriptTexts are the sentences console.js shows, in the reader's language,
// as data- attributes of the connection banner; %NAME% marks what the script
// fills in.
func scriptTexts(ctx context.Context) templ.Attributes {
	return templ.Attributes{
		"data-lost":          T(ctx, "ConnLost", "Time", "%TIME%", "Why", "%WHY%"),
		"data-why":           T(ctx, "ConnWhy", "Why", "%WHY%"),
		"data-answered":      T(ctx, "ConnAnswered", "Status", "%STATUS%"),
		"data-no-connection": T(ctx, "ConnNoConnection"),
		"data-no-answer":     T(ctx, "ConnNoAnswer"),
		"data-failed":        T(ctx, "ConnActionFailed", "Action", "%ACTION%", "Status", "%STATUS%", "Text", "%TEXT%"),
		"data-text":          T(ctx, "ConnText", "Text", "%TEXT%"),
		"data-text-end":      T(ctx, "ConnTextEnd"),
		"data-unreached":     T(ctx, "ConnActionUnreached", "Action", "%ACTION%", "Why", "%WHY%"),
		"data-the-action":    T(ctx, "ConnTheAction"),
		"data-dismiss-label": T(ctx, "Dismiss"),
		"data-copied":        T(ctx, "Copied"),
		"data-copy-select":   T(ctx, "CopySelect"),
		"data-none-selected": T(ctx, "BulkNoneSelected"),
		"data-selected":      T(ctx, "BulkSelected", "Count", "%N%"),
		"data-more":          T(ctx, "BulkMore", "Count", "%N%"),
		"data-confirm-one":   T(ctx, "BulkConfirmOne", "Action", "%ACTION%", "List", "%LIST%"),
		"data-confirm-many":  T(ctx, "BulkConfirmMany", "Action", "%ACTION%", "Count", "%N%", "List", "%LIST%"),
		"data-list-sep":      T(ctx, "ListSep"),
	}
}

// resultName names a run's result (success, failed, timeout, skipped,
// killed, lost, running); the badge's class keeps the English value.
func resultName(ctx context.Context, r string) string {
	switch r {
	case "success":
		return T(ctx, "ResultSuccess")
	case "failed":
		return T(ctx, "ResultFailed")
	case "timeout":
		return T(ctx, "ResultTimeout")
	case "skipped":
		return T(ctx, "ResultSkipped")
	case "killed":
		return T(ctx, "ResultKilled")
	case "lost":
		return T(ctx, "ResultLost")
	case "running":
		return T(ctx, "StatusRunningLower")
	}
	return r
}

// stepStateName names a workflow step's state or a workflow run's status.
func stepStateName(ctx context.Context, s string) string {
	switch s {
	case "pending":
		return T(ctx, "DelayedPending")
	case "dispatched":
		return T(ctx, "StepDispatched")
	case "cancelled":
		return T(ctx, "DelayedCancelled")
	case "queued":
		return T(ctx, "WorkflowQueued")
	}
	return resultName(ctx, s)
}

// triggerName names what started a workflow run (manual, api, rerun,
// schedule, backfill).
func triggerName(ctx context.Context, t string) string {
	switch t {
	case "manual":
		return T(ctx, "WorkflowTriggerManual")
	case "api":
		return T(ctx, "WorkflowTriggerAPI")
	case "rerun":
		return T(ctx, "WorkflowTriggerRerun")
	case "schedule":
		return T(ctx, "WorkflowTriggerSchedule")
	case "backfill":
		return T(ctx, "WorkflowTriggerBackfill")
	}
	return t
}

// backfillStateName names a backfill's state (running, paused, cancelled,
// done).
func backfillStateName(ctx context.Context, s string) string {
	switch s {
	case "running":
		return T(ctx, "StatusRunningLower")
	case "paused":
		return T(ctx, "TaskStatusPaused")
	case "cancelled":
		return T(ctx, "DelayedCancelled")
	case "done":
		return T(ctx, "BackfillDone")
	}
	return s
}

// nodeStatusName names a node's status (offline, idle, running).
func nodeStatusName(ctx context.Context, s string) string {
	switch s {
	case "offline":
		return T(ctx, "NodeStatusOffline")
	case "idle":
		return T(ctx, "NodeStatusIdle")
	case "running":
		return T(ctx, "StatusRunningLower")
	}
	return s
}

// nodeTypeName names a node's type (master, worker).
func nodeTypeName(ctx context.Context, t string) string {
	switch t {
	case "master":
		return T(ctx, "NodeTypeMaster")
	case "worker":
		return T(ctx, "NodeTypeWorker")
	}
	return t
}

// nodeModeName names how a worker joined (auto, manual, pending).
func nodeModeName(ctx context.Context, m string) string {
	switch m {
	case "auto":
		return T(ctx, "NodeModeAuto")
	case "manual":
		return T(ctx, "NodeModeManual")
	case "pending":
		return T(ctx, "NodeModePending")
	}
	return m
}

// taskStatusName names a task's status (stopped, running, paused).
func taskStatusName(ctx context.Context, s string) string {
	switch s {
	case "stopped":
		return T(ctx, "TaskStatusStopped")
	case "running":
		return T(ctx, "StatusRunningLower")
	case "paused":
		return T(ctx, "TaskStatusPaused")
	}
	return s
}

// labelFromName says who set a label in force (admin, worker).
func labelFromName(ctx context.Context, from string) string {
	switch from {
	case "admin":
		return T(ctx, "LabelFromAdmin")
	case "worker":
		return T(ctx, "LabelFromWorker")
	case "pending":
		return T(ctx, "LabelFromPending")
	}
	return from
}

// DelayedStatusName names a delayed task's status.
func DelayedStatusName(ctx context.Context, s string) string {
	switch s {
	case "pending":
		return T(ctx, "DelayedPending")
	case "running":
		return T(ctx, "StatusRunningLower")
	case "success":
		return T(ctx, "ResultSuccess")
	case "failed":
		return T(ctx, "ResultFailed")
	case "cancelled":
		return T(ctx, "DelayedCancelled")
	}
	return s
}

// targetTypeName names the kind of object an event is about.
func targetTypeName(ctx context.Context, t string) string {
	switch t {
	case "node":
		return T(ctx, "TargetNode")
	case "task":
		return T(ctx, "TargetTask")
	case "user":
		return T(ctx, "TargetUser")
	case "token":
		return T(ctx, "TargetToken")
	case "settings":
		return T(ctx, "TargetSettings")
	case "project":
		return T(ctx, "TargetProject")
	case "delayed":
		return T(ctx, "TargetDelayed")
	case "workflow":
		return T(ctx, "TargetWorkflow")
	case "connection":
		return T(ctx, "TargetConnection")
	}
	return t
}

// outcomeName is the word of an event's badge (ok, error, offline, recovered, clock skew).
func outcomeName(ctx context.Context, o string) string {
	switch o {
	case "ok":
		return T(ctx, "OutcomeOK")
	case "error":
		return T(ctx, "OutcomeError")
	case "offline":
		return T(ctx, "NodeStatusOffline")
	case "recovered":
		return T(ctx, "OutcomeRecovered")
	case "clock skew":
		return T(ctx, "NodeClockSkew")
	}
	return o
}
