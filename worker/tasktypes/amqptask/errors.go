package amqptask

import "errors"

// Sentinel errors of the amqp task type.
var (
	// ErrNoSpec means the task's definition has no amqp part.
	ErrNoSpec = errors.New("the task has no amqp definition")
	// ErrNoAddress means the connection has no host:port.
	ErrNoAddress = errors.New("the connection has no address")
	// ErrBadExchange means the exchange, its params expanded, is not a
	// name RabbitMQ accepts.
	ErrBadExchange = errors.New("the exchange must be at most 255 letters, digits, '-', '_', '.' or ':'")
	// ErrBadRoutingKey means the routing key, its params expanded, is
	// empty with the default exchange or longer than 255 bytes.
	ErrBadRoutingKey = errors.New("the routing key must be 1 to 255 bytes with the default exchange (the queue's name), at most 255 otherwise")
	// ErrAbandoned means a call to the broker was still waiting when the
	// run's time was up: the connection was closed to end it.
	ErrAbandoned = errors.New("the broker did not answer before the run ended: its connection was closed")
)
