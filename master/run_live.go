package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// liveCallTimeout bounds one call to a worker for a run page's poll or a
// kill: a page asks again a second later, and a hung worker must not hold
// the request.
const liveCallTimeout = 2 * time.Second

// RunLive is a run as its page shows it while it may be in progress: the
// stored run and, while its worker runs it, the worker's progress.
type RunLive struct {
	Run *store.Run
	// Progress is the worker's view of the run; nil when the run is not in
	// progress or its worker could not say.
	Progress *protocol.RunProgress
	// Ended: the stored run is in progress, but its worker no longer runs it
	// (the final report is on its way).
	Ended bool
	// Unreachable says why the worker could not be asked, for the page.
	Unreachable string
}

// InProgress reports whether the stored run is still in progress.
func (l RunLive) InProgress() bool { return l.Run != nil && !protocol.Result(l.Run.Result).Ended() }

// Live returns a run and, while it is in progress, asks only the worker
// that runs it for its output so far.
func (rs *Runs) Live(ctx context.Context, id string) (RunLive, error) {
	r, err := rs.Get(ctx, id)
	if err != nil {
		return RunLive{}, err
	}
	live := RunLive{Run: r}
	if protocol.Result(r.Result).Ended() {
		return live, nil
	}
	n, err := store.GetNode(ctx, rs.m.st.DB, r.Node)
	if err != nil {
		live.Unreachable = fmt.Sprintf("node %s is not known any more", r.Node)
		return live, nil
	}
	ctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
	defer cancel()
	p, err := rs.m.client.RunOutput(ctx, n, id)
	switch {
	case err == nil:
		// The worker masks secrets already; an older or hostile one may not.
		if err := rs.m.ingester.scrubProgress(ctx, r.TaskID, &p); err != nil {
			return RunLive{}, err
		}
		live.Progress = &p
	case isRunNotInProgress(err):
		// Ended since the page was drawn: read the run again, its final
		// report may be stored by now.
		if again, gerr := rs.Get(ctx, id); gerr == nil {
			live.Run = again
		}
		live.Ended = !protocol.Result(live.Run.Result).Ended() // its final report is on its way
	case isWorkerStatus(err, http.StatusNotFound):
		rs.m.log.Warn("run output: the worker does not know the route", "run", id, "node", r.Node, "err", err)
		live.Unreachable = fmt.Sprintf("node %s cannot show runs in progress (an older version, or something else answers at %s)", r.Node, n.Host)
	default:
		rs.m.log.Warn("run output: worker not reachable", "run", id, "node", r.Node, "err", err)
		live.Unreachable = Message(err)
	}
	return live, nil
}

// Kill kills a run in progress: its worker abandons the HTTP request or
// kills the shell command's process group, and reports the run as killed
// (not retried). A run that is not in progress gives KindState; a worker
// that does not answer, KindWorker.
func (rs *Runs) Kill(ctx context.Context, id string) error {
	r, err := rs.runFor(ctx, id, ActOperate)
	if err != nil {
		return err
	}
	refuse := func(err error) error {
		rs.m.events.record(ctx, "run.kill", store.TargetTask, r.TaskID, err, "run "+id)
		return err
	}
	if protocol.Result(r.Result).Ended() {
		return refuse(Errorf(KindState, "run %s is not in progress: it ended as %s", id, r.Result))
	}
	n, err := store.GetNode(ctx, rs.m.st.DB, r.Node)
	if err != nil {
		return refuse(Errorf(KindState, "run %s ran on node %s, which no longer exists", id, r.Node))
	}
	cctx, cancel := context.WithTimeout(ctx, liveCallTimeout)
	defer cancel()
	by := ActorFrom(ctx)
	if err := rs.m.client.KillRun(cctx, n, id, by); err != nil {
		if isRunNotInProgress(err) {
			return refuse(Errorf(KindState, "run %s has already ended on node %s; its result is on its way", id, r.Node))
		}
		if isWorkerStatus(err, http.StatusNotFound) {
			return refuse(Errorf(KindWorker, "node %s cannot kill runs (an older version, or something else answers at %s)", r.Node, n.Host))
		}
		return refuse(err)
	}
	rs.m.log.Info("run killed", "run", id, "task", r.TaskID, "node", r.Node, "by", by)
	rs.m.events.record(ctx, "run.kill", store.TargetTask, r.TaskID, nil, fmt.Sprintf("run %s on %s killed", id, r.Node))
	return nil
}

// isRunNotInProgress reports whether err is a worker's answer that the run is
// not in progress there; a 404 with another message is not one.
func isRunNotInProgress(err error) bool {
	var se *protocol.StatusError
	return errors.As(err, &se) && se.Status == http.StatusNotFound && se.Msg == protocol.ErrRunNotInProgress
}

// isWorkerStatus reports whether err is a worker's answer with status.
func isWorkerStatus(err error, status int) bool {
	var se *protocol.StatusError
	return errors.As(err, &se) && se.Status == status
}
