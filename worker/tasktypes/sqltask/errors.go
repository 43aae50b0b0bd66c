package sqltask

import "errors"

// Sentinel errors of sql tasks.
var (
	// ErrNoSpec is the error of a sql task without its sql definition.
	ErrNoSpec = errors.New("the task has no sql definition")
	// ErrKind is the error of a sql task whose connection reaches neither
	// PostgreSQL nor MySQL/MariaDB.
	ErrKind = errors.New("a sql task needs a connection of kind postgres or mysql")
	// ErrEmptyScript is the error of a script with nothing but blanks and
	// comments.
	ErrEmptyScript = errors.New("the script holds no statement")
)
