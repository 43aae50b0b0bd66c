package master

import (
	"fmt"
	"slices"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// The state table: which actions each node and task status allows. The engine's
// guards (the From lists of the conditional updates) and the console's buttons
// (through the handlers' view models) both read it, so a button is shown exactly
// when the engine accepts the action. The status types themselves live in store
// with their columns; this rule is the engine's, so it lives here.

// NodeAction is something an admin does to a worker node; the value is the
// console's path segment and data-action.
type NodeAction string

// Node actions.
const (
	NodeConnect       NodeAction = "connect"
	NodeEnable        NodeAction = "enable"
	NodeDisable       NodeAction = "disable"
	NodeDelete        NodeAction = "delete"
	NodeEdit          NodeAction = "edit"
	NodeResetIdentity NodeAction = "reset-identity"
)

// TaskAction is something a user does to a task; the value is the console's
// path segment and data-action.
type TaskAction string

// Task actions.
const (
	TaskStart  TaskAction = "start"
	TaskStop   TaskAction = "stop"
	TaskPause  TaskAction = "pause"
	TaskResume TaskAction = "resume"
	TaskRun    TaskAction = "run"
	TaskEdit   TaskAction = "edit"
	TaskDelete TaskAction = "delete"
)

// nodeTable lists the actions each node status allows. Reset identity does
// not depend on the status (it needs an auto node bound to a key); edit and
// delete of the master's own node are refused whatever its status.
var nodeTable = map[store.NodeStatus][]NodeAction{
	store.StatusOffline: {NodeConnect, NodeEdit, NodeDelete, NodeResetIdentity},
	store.StatusIdle:    {NodeEnable, NodeEdit, NodeDelete, NodeResetIdentity},
	store.StatusRunning: {NodeDisable, NodeEdit, NodeResetIdentity},
}

// taskTable lists the actions each task status allows. A deleted task allows
// nothing. Delete itself is from stopped: Tasks.Delete stops a running or paused
// task first, but the console offers Delete only once it is stopped. A
// running or paused task is edited in place (Tasks.Update switches every
// executor to the new definition, or none).
var taskTable = map[store.TaskStatus][]TaskAction{
	store.TaskStopped: {TaskStart, TaskRun, TaskEdit, TaskDelete},
	store.TaskRunning: {TaskPause, TaskStop, TaskRun, TaskEdit},
	store.TaskPaused:  {TaskResume, TaskStop, TaskRun, TaskEdit},
}

// NodeActions returns the actions a node in status s allows.
func NodeActions(s store.NodeStatus) []NodeAction { return slices.Clone(nodeTable[s]) }

// TaskActions returns the actions a task in status s allows.
func TaskActions(s store.TaskStatus) []TaskAction { return slices.Clone(taskTable[s]) }

// NodeAllows says whether a node in status s allows a.
func NodeAllows(s store.NodeStatus, a NodeAction) bool { return slices.Contains(nodeTable[s], a) }

// TaskAllows says whether a task in status s allows a.
func TaskAllows(s store.TaskStatus, a TaskAction) bool { return slices.Contains(taskTable[s], a) }

// nodeFrom is the From list of a's conditional update: every status allowing it.
func nodeFrom(a NodeAction) []store.NodeStatus {
	var out []store.NodeStatus
	for _, s := range store.NodeStatuses {
		if NodeAllows(s, a) {
			out = append(out, s)
		}
	}
	return out
}

// taskFrom is the From list of a's conditional update: every status allowing it.
func taskFrom(a TaskAction) []store.TaskStatus {
	var out []store.TaskStatus
	for _, s := range store.TaskStatuses {
		if TaskAllows(s, a) {
			out = append(out, s)
		}
	}
	return out
}

// statusList names statuses for messages: "offline", "stopped or paused".
func statusList[S fmt.Stringer](ss []S) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.String()
	}
	return strings.Join(names, " or ")
}
