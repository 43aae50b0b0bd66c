package master

import "errors"

// Sentinel errors of the master engine; handlers map them to HTTP statuses.
var (
	// ErrInvalid means bad input (a worker.FieldErrors carries the fields).
	ErrInvalid = errors.New("master: invalid input")
	// ErrNotFound means the node does not exist.
	ErrNotFound = errors.New("master: not found")
	// ErrDuplicate means the name is taken.
	ErrDuplicate = errors.New("master: already exists")
	// ErrState means the action is not allowed in the node's current status.
	ErrState = errors.New("master: not allowed in this state")
	// ErrWorker means a call to a worker failed; the node's state is unchanged.
	ErrWorker = errors.New("master: worker call failed")
	// ErrUnauthorized means a worker-to-master call failed authentication.
	ErrUnauthorized = errors.New("master: unauthorized")
	// ErrForbidden means an authenticated caller acted as someone else or on
	// something it may not touch (a worker reporting runs of another's task).
	ErrForbidden = errors.New("master: forbidden")
)
