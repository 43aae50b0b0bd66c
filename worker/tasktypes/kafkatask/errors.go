package kafkatask

import "errors"

// Sentinel errors of the kafka executor.
var (
	// ErrNoSpec is a run's error when the task has no kafka definition.
	ErrNoSpec = errors.New("the task has no kafka definition")
	// ErrSASLUser is a connection with a user or secret but no sasl
	// option, or a sasl option without a user: the mechanism is not
	// guessed, as a wrong guess fails with a puzzling authentication error.
	ErrSASLUser = errors.New("a kafka connection authenticates with both a user and the sasl option (plain, scram-sha-256 or scram-sha-512)")
	// ErrNoBroker is a run's error when no broker of the connection answered.
	ErrNoBroker = errors.New("no broker answered")
)
