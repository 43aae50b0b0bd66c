// Pushes of many tasks at once: a node's tasks in parts (a restarted
// master's re-push) and one operation on many tasks (bulk actions), each a
// bounded call instead of one huge body or one call per task.

package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// partSession is a schedule arriving in parts: a master's push
// (StartupPart, or Startup's one body) or a registration's answer and the
// pages the worker fetches after it (register). It holds the tasks its
// parts named so far, whether one took its last fire from the previous
// process, what the first part said of the master's misfire windows, and
// the single task operations that came meanwhile.
type partSession struct {
	id   string
	want map[string]bool
	took bool
	// downNoticed and runningSince are the first part's (see
	// protocol.StartupRequest): every part's tasks are scheduled with
	// them, however late they come.
	downNoticed  bool
	runningSince *time.Time
	// direct holds the tasks a single operation (start, stop, pause,
	// resume: StartTask, StopTask, PauseTask, ResumeTask, TaskBatch)
	// changed during the session, with the last one. A part read by a
	// master before that operation reached its database would undo it (a
	// stop is sent to the workers before it is stored), so the part's word
	// on such a task yields: a stopped task is not started again, a started
	// one keeps what it was started with, a pause or resume holds. A part
	// read after the operation says what it says.
	direct map[string]directOp
	// overflow: the session was given up, past maxDirectOps.
	overflow bool
}

// directOp is a single task operation noted by a partSession.
type directOp uint8

const (
	opStarted directOp = iota + 1
	opStopped
	opPaused
	opResumed
)

// maxDirectOps bounds the operations one session notes (one entry a task):
// a session that outlives more is given up, and the schedule is given again
// by the master's next push or a new registration.
const maxDirectOps = 1 << 20

// newPartSession begins a session: it supersedes the one in progress, if
// any. Called under partMu.
func (w *Worker) newPartSession(id string) *partSession {
	ps := &partSession{id: id, want: map[string]bool{}, direct: map[string]directOp{}}
	w.part = ps
	return ps
}

// ErrPartSession means a part of a push in parts came for a session the
// worker does not hold: another push began since, or the first part is
// missing. The master pushes again from the first part.
var ErrPartSession = errors.New("worker: no such push session (another push began since); push again from the first part")

// endPartSession forgets the session in progress, if any: what comes of it
// later is not applied.
func (w *Worker) endPartSession() {
	w.partMu.Lock()
	w.part = nil
	w.partMu.Unlock()
}

// noteDirect records a single operation on task id in the session in
// progress, if any. Called under partMu, after the operation was done.
func (w *Worker) noteDirect(id string, op directOp) {
	ps := w.part
	if ps == nil {
		return
	}
	if _, ok := ps.direct[id]; !ok && len(ps.direct) >= maxDirectOps {
		w.log.Warn("too many task operations while a schedule arrives in parts: it is given up; "+
			"the master's next push or a new registration gives it again", "operations", len(ps.direct))
		ps.overflow = true
		w.part = nil
		return
	}
	ps.direct[id] = op
	switch op {
	case opStarted:
		ps.want[id] = true // the last part must not drop it
	case opStopped:
		delete(ps.want, id)
	}
}

// applyPart schedules one part of session ps, the current one, as its
// direct operations leave it; the last part drops the tasks no part named
// and no operation started, and ends the session. Called under partMu.
func (w *Worker) applyPart(ps *partSession, tasks []protocol.TaskSpec, last bool) error {
	specs := tasks
	if len(ps.direct) > 0 {
		specs = make([]protocol.TaskSpec, 0, len(tasks))
		for _, s := range tasks {
			switch ps.direct[s.ID] {
			case opStarted, opStopped:
				continue
			case opPaused:
				s.Paused = true
			case opResumed:
				s.Paused = false
			}
			specs = append(specs, s)
		}
	}
	// The fires between the master's window end and the moment a task is
	// scheduled again are this worker's to count, for the tasks given by
	// the session only.
	if ps.downNoticed && ps.runningSince != nil {
		w.runner.fires.handUp(*ps.runningSince)
		defer w.runner.fires.handUp(time.Time{})
	}
	took, errs := w.runner.startAll(specs, ps.want)
	ps.took = ps.took || took
	if last {
		w.runner.prune(ps.want, ps.took)
		w.part = nil
		w.log.Info("scheduling started", "tasks", w.runner.count())
	}
	err := notScheduled(errs)
	if err != nil {
		w.log.Error("some tasks could not be scheduled", "err", err)
	}
	return err
}

// StartupPart schedules one part of a push in parts; the last part drops
// the tasks no part named, as Startup drops those its body does not hold.
// Parts of one session come one after another from one master; a first
// part begins a new session, superseding one in progress.
func (w *Worker) StartupPart(ctx context.Context, req protocol.StartupPartRequest) error {
	if req.Session == "" || len(req.Session) > 128 {
		return fmt.Errorf("%w: session is required (at most 128 chars)", protocol.ErrInvalid)
	}
	if len(req.Tasks) > protocol.MaxTaskBatch {
		return fmt.Errorf("%w: %d tasks in one part: at most %d", protocol.ErrInvalid, len(req.Tasks), protocol.MaxTaskBatch)
	}
	if err := w.waitStarted(ctx); err != nil {
		return err
	}
	w.partMu.Lock()
	defer w.partMu.Unlock()
	ps := w.part
	if req.First {
		ps = w.newPartSession(req.Session)
		ps.downNoticed, ps.runningSince = req.DownNoticed, req.RunningSince
		w.handDown(req.DownNoticed, req.DownSince)
	}
	if ps == nil || ps.id != req.Session {
		return ErrPartSession
	}
	// Under partMu, after the session check: a Shutdown that ended the
	// session is not undone by a part of it.
	if err := w.beginScheduling(ctx); err != nil {
		return err
	}
	return w.applyPart(ps, req.Tasks, req.Last)
}

// TaskBatch does op to many tasks, each on its own, as the call for that
// task alone would (a refusal is its status and error in the result). The
// fires file is written once for the batch.
func (w *Worker) TaskBatch(req protocol.TaskBatchRequest, status func(error) int) ([]protocol.TaskBatchResult, error) {
	n := len(req.Tasks) + len(req.IDs)
	if n > protocol.MaxTaskBatch {
		return nil, fmt.Errorf("%w: %d tasks in one batch: at most %d", protocol.ErrInvalid, n, protocol.MaxTaskBatch)
	}
	if req.Op == protocol.BatchStart && len(req.IDs) > 0 || req.Op != protocol.BatchStart && len(req.Tasks) > 0 {
		return nil, fmt.Errorf("%w: op start carries tasks, the other ops ids", protocol.ErrInvalid)
	}
	out := make([]protocol.TaskBatchResult, 0, n)
	add := func(id string, err error) {
		r := protocol.TaskBatchResult{ID: id, Status: http.StatusOK}
		if err != nil {
			r.Status, r.Error = status(err), err.Error()
		}
		out = append(out, r)
	}
	switch req.Op {
	case protocol.BatchStart:
		if err := w.waitScheduling(); err != nil {
			for _, s := range req.Tasks {
				add(s.ID, err)
			}
			return out, nil
		}
		w.partMu.Lock()
		defer w.partMu.Unlock()
		took := false
		for _, s := range req.Tasks {
			t, err := w.runner.startSpec(s)
			took = took || t
			if err == nil {
				w.noteDirect(s.ID, opStarted)
			}
			add(s.ID, err)
		}
		if took {
			w.runner.forgetMissed()
			w.runner.writeFires(false)
		}
	case protocol.BatchStop:
		w.partMu.Lock()
		defer w.partMu.Unlock()
		for _, id := range req.IDs {
			w.stopTaskLocked(id)
			add(id, nil)
		}
	case protocol.BatchPause, protocol.BatchResume:
		w.partMu.Lock()
		defer w.partMu.Unlock()
		for _, id := range req.IDs {
			add(id, w.setPausedLocked(id, req.Op == protocol.BatchPause))
		}
	default:
		return nil, fmt.Errorf("%w: unknown op %q: it must be start, stop, pause or resume", protocol.ErrInvalid, clipOp(req.Op))
	}
	return out, nil
}

// clipOp shortens an op for a message.
func clipOp(op string) string {
	if len(op) > 20 {
		return op[:20] + "…"
	}
	return op
}
