package mqtttask

import "errors"

var (
	// ErrRefused is a CONNACK that refused the connection (bad user name or
	// password, not authorized, ...): the reason follows it.
	ErrRefused = errors.New("the MQTT broker refused the connection")
	// ErrRejected is a PUBACK, PUBREC or PUBCOMP whose reason code says the
	// broker did not take the message (MQTT 5 only: 3.1.1 has no codes).
	ErrRejected = errors.New("the MQTT broker did not accept the message")
	// ErrClosed is a run that asked for a connection after the executor
	// was closed (the worker is stopping).
	ErrClosed = errors.New("the MQTT executor is closed: the worker is stopping")
	// ErrTopic is a topic that, once its params are expanded, is empty or
	// holds a wildcard: a broker would drop the whole shared connection.
	ErrTopic = errors.New("the topic is not one a message can be published to")
)
