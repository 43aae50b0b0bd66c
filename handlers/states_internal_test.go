package handlers

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

var dataAction = regexp.MustCompile(`data-action="([^"]+)"`)

// TestNodeButtonsFollowStateTable: for every node status, the rows fragment
// shows exactly the actions master.NodeActions allows, so no button shown
// is refused and no allowed action lacks its button.
func TestNodeButtonsFollowStateTable(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, s := range store.NodeStatuses {
		// An auto worker bound to a key: the only node that can show every button.
		n := store.Node{Name: "w1", Type: store.TypeWorker, Protocol: "http", Host: "127.0.0.1:1",
			Status: s, Mode: store.ModeAuto, NodeKey: "ab"}
		var buf bytes.Buffer
		vm := views.NodesVM{Rows: []views.NodeRow{nodeRow(locale.New(locale.EN, nil), n, now)}, ShowActions: true}
		if err := views.NodeRows(vm).Render(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		var shown []string
		for _, m := range dataAction.FindAllStringSubmatch(buf.String(), -1) {
			shown = append(shown, m[1])
		}
		if bytes.Contains(buf.Bytes(), []byte(`href="/nodes/w1/edit"`)) {
			shown = append(shown, string(master.NodeEdit))
		}
		var want []string
		for _, a := range master.NodeActions(s) {
			want = append(want, string(a))
		}
		slices.Sort(shown)
		slices.Sort(want)
		if !slices.Equal(shown, want) {
			t.Errorf("node %s: buttons %v, engine allows %v", s, shown, want)
		}
	}
	// The master's own node has no buttons, whatever its status.
	var buf bytes.Buffer
	m := store.Node{Name: "m", Type: store.TypeMaster, Status: store.StatusRunning}
	if err := views.NodeRows(views.NodesVM{Rows: []views.NodeRow{nodeRow(locale.New(locale.EN, nil), m, now)}, ShowActions: true}).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if dataAction.Match(buf.Bytes()) {
		t.Errorf("the master's node shows buttons: %s", buf.String())
	}
}

// TestTaskButtonsFollowStateTable: for every task status, the rows fragment
// and the task page show exactly the actions master.TaskActions allows.
func TestTaskButtonsFollowStateTable(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, s := range store.TaskStatuses {
		tk := &master.Task{Status: s}
		tk.ID, tk.Title, tk.Type = "t1", "task", "http"
		var want []string
		for _, a := range master.TaskActions(s) {
			want = append(want, string(a))
		}
		slices.Sort(want)
		var rows, page bytes.Buffer
		if err := views.TaskRows(views.TasksVM{Rows: []views.TaskRow{taskRow(locale.New(locale.EN, nil), tk, now)}, ShowActions: true}).Render(context.Background(), &rows); err != nil {
			t.Fatal(err)
		}
		if err := views.TaskPanel(views.TaskVM{ID: tk.ID, Title: tk.Title, Actions: taskActions(s), ShowActions: true}).Render(context.Background(), &page); err != nil {
			t.Fatal(err)
		}
		for where, buf := range map[string]*bytes.Buffer{"list": &rows, "page": &page} {
			var shown []string
			for _, m := range dataAction.FindAllStringSubmatch(buf.String(), -1) {
				shown = append(shown, m[1])
			}
			slices.Sort(shown)
			if !slices.Equal(shown, want) {
				t.Errorf("task %s (%s): buttons %v, engine allows %v", s, where, shown, want)
			}
		}
	}
}
