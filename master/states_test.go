package master_test

import (
	"slices"
	"testing"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// TestNodeStateTable pins which actions each node status allows (README, "How nodes work").
func TestNodeStateTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    store.NodeStatus
		name string
		want []master.NodeAction
	}{
		{store.StatusOffline, "offline", []master.NodeAction{master.NodeConnect, master.NodeEdit, master.NodeDelete, master.NodeResetIdentity}},
		{store.StatusIdle, "idle", []master.NodeAction{master.NodeEnable, master.NodeEdit, master.NodeDelete, master.NodeResetIdentity}},
		{store.StatusRunning, "running", []master.NodeAction{master.NodeDisable, master.NodeEdit, master.NodeResetIdentity}},
		{store.NodeStatus(7), "status 7", nil},
	} {
		if c.s.String() != c.name {
			t.Errorf("NodeStatus(%d).String() = %q, want %q", int(c.s), c.s.String(), c.name)
		}
		if got := master.NodeActions(c.s); !slices.Equal(got, c.want) {
			t.Errorf("NodeActions(%s) = %v, want %v", c.s, got, c.want)
		}
		for _, a := range []master.NodeAction{master.NodeConnect, master.NodeEnable, master.NodeDisable,
			master.NodeDelete, master.NodeEdit, master.NodeResetIdentity} {
			if got := master.NodeAllows(c.s, a); got != slices.Contains(c.want, a) {
				t.Errorf("NodeAllows(%s, %s) = %t", c.s, a, got)
			}
		}
	}
}

// TestTaskStateTable pins which actions each task status allows.
func TestTaskStateTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    store.TaskStatus
		name string
		want []master.TaskAction
	}{
		{store.TaskDeleted, "deleted", nil},
		{store.TaskStopped, "stopped", []master.TaskAction{master.TaskStart, master.TaskRun, master.TaskEdit, master.TaskDelete}},
		{store.TaskRunning, "running", []master.TaskAction{master.TaskPause, master.TaskStop, master.TaskRun, master.TaskEdit}},
		{store.TaskPaused, "paused", []master.TaskAction{master.TaskResume, master.TaskStop, master.TaskRun, master.TaskEdit}},
		{store.TaskStatus(9), "status 9", nil},
	} {
		if c.s.String() != c.name {
			t.Errorf("TaskStatus(%d).String() = %q, want %q", int(c.s), c.s.String(), c.name)
		}
		if got := master.TaskActions(c.s); !slices.Equal(got, c.want) {
			t.Errorf("TaskActions(%s) = %v, want %v", c.s, got, c.want)
		}
		for _, a := range []master.TaskAction{master.TaskStart, master.TaskStop, master.TaskPause, master.TaskResume,
			master.TaskRun, master.TaskEdit, master.TaskDelete} {
			if got := master.TaskAllows(c.s, a); got != slices.Contains(c.want, a) {
				t.Errorf("TaskAllows(%s, %s) = %t", c.s, a, got)
			}
		}
	}
	// The returned lists are copies: a caller cannot change the table.
	master.TaskActions(store.TaskStopped)[0] = master.TaskDelete
	if !master.TaskAllows(store.TaskStopped, master.TaskStart) {
		t.Error("TaskActions returned the table itself")
	}
}
