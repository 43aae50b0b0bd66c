package store

import (
	"errors"
	"fmt"
)

// Sentinel errors returned by store queries; callers test them with errors.Is.
var (
	// ErrNotFound means the row asked for does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrDuplicate means a unique key (a node or user name) is already taken.
	ErrDuplicate = errors.New("store: already exists")
	// ErrConflict means a conditional update matched no row: the state changed underneath.
	ErrConflict = errors.New("store: state changed concurrently")
	// ErrLeaseLost means a fenced write was refused: its writer no longer
	// holds the lease under the fence's epoch. It is an ErrConflict too.
	ErrLeaseLost = fmt.Errorf("store: lease not held: %w", ErrConflict)
)
