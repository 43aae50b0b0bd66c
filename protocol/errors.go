package protocol

import "errors"

// Sentinel errors of the protocol. Their texts are kept from the time they
// lived in the worker package, since they reach API answers.
var (
	// ErrHandshake means a signed request (Connect, registration) failed verification.
	ErrHandshake = errors.New("worker: handshake refused")
	// ErrInvalid means a request body or configuration is malformed.
	ErrInvalid = errors.New("worker: invalid input")
	// ErrBatchTooLarge means a run-report batch is over MaxRunsPerBatch runs
	// or MaxRunsBatchBytes bytes.
	ErrBatchTooLarge = errors.New("run report batch too large")
)
