package natstask

import "errors"

// Sentinel errors of the nats task type.
var (
	// ErrNoSpec means the task's definition has no nats part.
	ErrNoSpec = errors.New("the task has no nats definition")
	// ErrNoAddress means the connection lists no host:port.
	ErrNoAddress = errors.New("the connection has no address")
	// ErrBadSubject means the subject, its params expanded, is not one
	// NATS can publish to.
	ErrBadSubject = errors.New("the subject must be tokens separated by dots, without spaces or the wildcards * and >")
	// ErrBadHeader means a header, its params expanded, would break the
	// NATS header block (a line break in it).
	ErrBadHeader = errors.New("a header name or value holds a line break")
)
