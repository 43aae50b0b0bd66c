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

// partSession is a push in parts in progress: the tasks its parts named so
// far, and whether one took its last fire from the previous process.
type partSession struct {
	id   string
	want map[string]bool
	took bool
}

// ErrPartSession means a part of a push in parts came for a session the
// worker does not hold: another push began since, or the first part is
// missing. The master pushes again from the first part.
var ErrPartSession = errors.New("worker: no such push session (another push began since); push again from the first part")

// endPartSession forgets the push in parts in progress, if any.
func (w *Worker) endPartSession() {
	w.partMu.Lock()
	w.part = nil
	w.partMu.Unlock()
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
	if err := w.beginScheduling(ctx); err != nil {
		return err
	}
	w.partMu.Lock()
	defer w.partMu.Unlock()
	if req.First {
		w.part = &partSession{id: req.Session, want: map[string]bool{}}
		w.handDown(req.DownNoticed, req.DownSince)
	}
	ps := w.part
	if ps == nil || ps.id != req.Session {
		return ErrPartSession
	}
	if req.DownNoticed && req.RunningSince != nil {
		w.runner.fires.handUp(*req.RunningSince)
		defer w.runner.fires.handUp(time.Time{})
	}
	took, errs := w.runner.startAll(req.Tasks, ps.want)
	ps.took = ps.took || took
	if req.Last {
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
		took := false
		for _, s := range req.Tasks {
			t, err := w.runner.startSpec(s)
			took = took || t
			add(s.ID, err)
		}
		if took {
			w.runner.forgetMissed()
			w.runner.writeFires(false)
		}
	case protocol.BatchStop:
		for _, id := range req.IDs {
			w.StopTask(id)
			add(id, nil)
		}
	case protocol.BatchPause, protocol.BatchResume:
		for _, id := range req.IDs {
			add(id, w.runner.setPaused(id, req.Op == protocol.BatchPause))
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
