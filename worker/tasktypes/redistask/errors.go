package redistask

import "errors"

var (
	// ErrNotAllowed is a "command" task whose command is not one of
	// protocol.RedisAllowedCommands: refused here too, whatever the master
	// checked, so a definition that reached the worker another way cannot
	// flush or reconfigure the server.
	ErrNotAllowed = errors.New("the redis command is not allowed")
	// ErrDefinition is a redis task the worker cannot run as it stands.
	ErrDefinition = errors.New("the redis task's definition cannot run")
)
