package master

import (
	"context"

	"github.com/uptrace/bun"
)

// Reads are the engine's read-only queries that pages and the API show:
// the event log, the dashboard, run searches and task health. They change
// nothing, so they need only the database, the bound on large lists and a
// way to tell a missing task.
type Reads struct {
	db       bun.IDB
	runLists *slots
	getTask  func(ctx context.Context, id string) (*Task, error)
}

// Reads is the engine's read-only queries.
func (m *Master) Reads() *Reads { return m.reads }
