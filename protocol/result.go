package protocol

// Result is the outcome of a run. Every decision that depends on it (does
// the run count as a failure, is it retried, does it notify, has it ended)
// is a method here, so that the worker, the master's ingest, health,
// notifications and the console decide alike. The constants stay untyped:
// the store keeps the result as a plain string (it imports nothing of
// ours), and a store row's result is asked with Result(row.Result).
type Result string

// Run results.
const (
	ResultSuccess = "success"
	ResultFailed  = "failed"
	ResultTimeout = "timeout"
	ResultSkipped = "skipped"
	// ResultKilled: an admin killed the run while it was in progress, or
	// the worker's stop did (it was still going when the drain timeout
	// passed); its output ends saying which.
	ResultKilled = "killed"
	// ResultRunning marks a start notice: a report of a run still in
	// progress (no EndedAt), sent when a run lasts longer than
	// LiveNoticeAfter so that the master can show it, stream its output and
	// kill it. The run's final report replaces it.
	ResultRunning = "running"
	// ResultLost is given by the master, never a worker: the run was in
	// progress on a worker that went offline or restarted, so its end is
	// unknown. A final report that arrives later still replaces it.
	ResultLost = "lost"
)

// Reported reports whether a worker may send this result in a run report:
// every result but lost, which only the master gives.
func (r Result) Reported() bool {
	switch r {
	case ResultSuccess, ResultFailed, ResultTimeout, ResultSkipped, ResultKilled, ResultRunning:
		return true
	}
	return false
}

// Ended reports whether the run is over: every result but running (a start
// notice). Only an ended run is acted upon (notifications, children,
// delayed tasks) and only a running one can be watched or killed.
func (r Result) Ended() bool { return r != ResultRunning }

// Succeeded reports whether the run succeeded: it starts the task's
// children, ends a delayed task, and counts as a success in health.
func (r Result) Succeeded() bool { return r == ResultSuccess }

// Failure reports whether the run ran and did not succeed: failed, timed
// out, killed or lost. It counts against the task's health and its failing
// streak.
func (r Result) Failure() bool {
	switch r {
	case ResultFailed, ResultTimeout, ResultKilled, ResultLost:
		return true
	}
	return false
}

// CountsInHealth reports whether the run counts in its task's health: a
// success or a failure. Any other result (skipped, a run still going, one
// this version does not know) says nothing of how the task runs.
func (r Result) CountsInHealth() bool { return r.Succeeded() || r.Failure() }

// Notifies reports whether the run's end is notified (mail, webhook): a run
// that failed or timed out, on its last attempt. A kill is an admin's own
// doing and a lost run is the node's event, not the task's.
func (r Result) Notifies() bool { return r == ResultFailed || r == ResultTimeout }

// Retryable reports whether the worker runs the task again, while retries
// remain, after an attempt with this result: failed or timed out. A success
// is done, a kill is never retried, and a fire skipped because the node was
// full is recorded once: retrying it would only queue again behind the runs
// that filled the node.
func (r Result) Retryable() bool {
	switch r {
	case ResultFailed, ResultTimeout:
		return true
	}
	return false
}

// UsesAttempt reports whether a delayed task's sending that ended with this
// result used one of its attempts: every ended result but skipped (the
// worker was full; the same attempt is sent again).
func (r Result) UsesAttempt() bool { return r.Ended() && r != ResultSkipped }
