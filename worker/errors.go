package worker

import "errors"

// Sentinel errors of the worker engine.
var (
	// ErrHandshake means a Connect request failed verification.
	ErrHandshake = errors.New("worker: handshake refused")
	// ErrInvalid means a request body or configuration is malformed.
	ErrInvalid = errors.New("worker: invalid input")
	// ErrNotConnected means the worker has no master yet (manual mode before Connect).
	ErrNotConnected = errors.New("worker: not connected to a master")
)
