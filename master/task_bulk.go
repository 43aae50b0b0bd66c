// Bulk actions: one action on many tasks, each task on its own.

package master

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// MaxBulkTasks bounds how many tasks one bulk action names.
const MaxBulkTasks = 500

// bulkParallel is how many tasks of a bulk action are acted on at once: an
// action waits on every executor, so a few at a time keep a page of tasks
// quick without flooding the workers.
const bulkParallel = 8

// BulkActions are the actions a bulk request may ask for.
var BulkActions = []TaskAction{TaskPause, TaskResume, TaskStop, TaskDelete}

// BulkResult is the outcome of a bulk action for one task: OK, or Error
// saying why not. Refused says the task was left as it was because its
// status (or its absence) does not allow the action; otherwise the action
// was tried and failed (e.g. a worker did not answer).
type BulkResult struct {
	ID      string `json:"id"`
	Title   string `json:"title,omitempty"`
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Refused bool   `json:"refused,omitempty"`
}

// CheckBulk validates a bulk request as a whole: a known action and from 1
// to MaxBulkTasks task ids. It returns the ids without repeats, in order.
func CheckBulk(action string, ids []string) ([]string, error) {
	if !slices.Contains(BulkActions, TaskAction(action)) {
		names := make([]string, len(BulkActions))
		for i, a := range BulkActions {
			names[i] = string(a)
		}
		return nil, Errorf(KindInvalid, "unknown action %q: it must be one of %s", bulkClip(action, 40), strings.Join(names, ", "))
	}
	if len(ids) > MaxBulkTasks {
		return nil, Errorf(KindInvalid, "%d tasks named: at most %d at once", len(ids), MaxBulkTasks)
	}
	out := make([]string, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil, Errorf(KindInvalid, "no task selected: select at least one task")
	}
	return out, nil
}

// BulkTasks does action (pause, resume, stop or delete) to each task of ids,
// each on its own: a task that does not exist, whose status does not allow
// the action, or whose action fails is reported and never stops the others.
// Delete is refused for a task that is not stopped (unlike DeleteTask, which
// stops it first): a selection may hold running tasks by mistake. The
// results are in the order of the ids, repeats removed.
func (m *Master) BulkTasks(ctx context.Context, action string, ids []string) ([]BulkResult, error) {
	ids, err := CheckBulk(action, ids)
	if err != nil {
		return nil, err
	}
	a := TaskAction(action)
	act := ActOperate
	if a == TaskDelete {
		act = ActEdit
	}
	if p := PrincipalFrom(ctx); p != nil && !p.CanAnywhere(act) {
		return nil, Errorf(KindForbidden, "forbidden: your role may not %s in any project", actionVerb[act])
	}
	out := make([]BulkResult, len(ids))
	sem := make(chan struct{}, bulkParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = m.bulkOne(ctx, a, id)
		}()
	}
	wg.Wait()
	return out, nil
}

// bulkOne does a to one task and says how it went.
func (m *Master) bulkOne(ctx context.Context, a TaskAction, id string) BulkResult {
	r := BulkResult{ID: id}
	act := ActOperate
	if a == TaskDelete {
		act = ActEdit
	}
	ctx, t, err := m.taskFor(ctx, id, act)
	if errors.Is(err, ErrNotFound) {
		r.Error, r.Refused = "no such task", true
		return r
	}
	if err != nil {
		return m.bulkFailed(r, a, err)
	}
	r.Title = t.Title
	if !TaskAllows(t.Status, a) {
		r.Error, r.Refused = bulkRefusal(a, t.Status), true
		return r
	}
	switch a {
	case TaskPause:
		_, err = m.PauseTask(ctx, id)
	case TaskResume:
		_, err = m.ResumeTask(ctx, id)
	case TaskStop:
		_, err = m.StopTask(ctx, id)
	case TaskDelete:
		err = m.deleteStoppedTask(ctx, id)
	}
	if err != nil {
		return m.bulkFailed(r, a, err)
	}
	r.OK = true
	return r
}

// bulkFailed reports an action that was tried and failed: a refusal with
// its sentence, anything else (a database error) only in the log.
func (m *Master) bulkFailed(r BulkResult, a TaskAction, err error) BulkResult {
	if KindOf(err) == 0 {
		m.log.Error("bulk task action", "action", a, "task", r.ID, "err", err)
		r.Error = "internal error; see the master's log"
		return r
	}
	r.Error, r.Refused = Message(err), errors.Is(err, ErrState)
	return r
}

// bulkRefusal says why a task in status s is left alone by a.
func bulkRefusal(a TaskAction, s store.TaskStatus) string {
	switch {
	case a == TaskDelete && TaskAllows(s, TaskStop):
		return "it is " + s.String() + " — stop it first"
	case a == TaskStop:
		return "it is already stopped"
	case a == TaskPause && s == store.TaskPaused:
		return "it is already paused"
	case a == TaskPause:
		return "it is " + s.String() + " — only a running task can be paused"
	case a == TaskResume && s == store.TaskRunning:
		return "it is already running"
	case a == TaskResume:
		return "it is " + s.String() + " — only a paused task can be resumed"
	}
	return "it is " + s.String()
}

// deleteStoppedTask marks a stopped task deleted; a task that was started
// meanwhile is refused (the update is conditional on the stopped status).
func (m *Master) deleteStoppedTask(ctx context.Context, id string) (err error) {
	defer func() { m.events.record(ctx, "task.delete", store.TargetTask, id, err, "") }()
	defer m.locks.lock("task:" + id)()
	if err := store.SetTaskStatus(ctx, m.st.DB, id, taskFrom(TaskDelete), store.TaskDeleted); err != nil {
		return mapTaskErr(err, id)
	}
	m.log.Info("task deleted", "task", id)
	return nil
}

// bulkClip shortens s to at most n bytes (on a rune boundary) for a message.
func bulkClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
