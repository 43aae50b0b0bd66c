package worker

import "errors"

// Sentinel errors of the worker engine.
var (
	// ErrNotScheduling means a task operation reached a worker that is not scheduling.
	ErrNotScheduling = errors.New("worker: not scheduling (enable the node first)")
	// ErrShellRefused means a shell task reached a worker started without --allow-shell.
	ErrShellRefused = errors.New("worker: shell tasks are refused: this worker was started without --allow-shell")
	// ErrTypeRefused means a task of a type this worker does not run
	// reached it: a gated type its operator did not allow (--allow-types).
	ErrTypeRefused = errors.New("worker: task type refused")
	// ErrNotRunning means work reached a worker that Run has not started or
	// that Stop has stopped.
	ErrNotRunning = errors.New("worker: not running")
	// ErrRunning means Run was called on a worker it already runs.
	ErrRunning = errors.New("worker: Run was called already")
	// ErrStopped means Run was called on a worker that Stop has stopped.
	ErrStopped = errors.New("worker: stopped; build a new worker with New")
	// ErrUnknownTask means the task is not scheduled on this worker.
	ErrUnknownTask = errors.New("worker: task is not scheduled here")
)

// errBatchRefused means the master refused a whole batch of run reports as
// unreadable (400 or 413): resending it unchanged can never succeed.
var errBatchRefused = errors.New("worker: the master refused the batch as unreadable")

// errClaimTooEarly means the master refused a claim because the fire is
// further ahead of its clock than it decides fires (this node's clock runs
// fast), and the time to come back did not fit in the claim's timeout.
var errClaimTooEarly = errors.New("worker: the master refused the claim as too early for its clock (is this node's clock fast? check NTP)")
