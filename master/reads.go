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
	// cache keeps the aggregate counts of a large estate.
	cache *readCache
}

// Reads is the engine's read-only queries.
func (m *Master) Reads() *Reads { return m.reads }

// ListCountCap is how far the lists (tasks, runs, delayed tasks, events)
// count the items matching their filters: past it a list says "more than
// 10,000", so a page costs the same over a hundred items and over millions.
const ListCountCap = 10_000

// countLimit is a list's count bound: ListCountCap unless the caller asked
// for one (a negative one counts everything).
func countLimit(asked int) int {
	if asked == 0 {
		return ListCountCap
	}
	return asked
}
