// The delayed tasks as the handlers reach them: the engine's facade over
// the delayed-task service.

package master

import (
	"context"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// CreateDelayed validates and stores a new pending delayed task. Creating
// the same source_app, topic and content_key again while one is pending or
// running gives that one and created false (nothing is changed).
func (m *Master) CreateDelayed(ctx context.Context, in DelayedInput, by string) (_ *Delayed, created bool, err error) {
	return m.delayed.CreateDelayed(ctx, in, by)
}

// GetDelayed returns one delayed task.
func (m *Master) GetDelayed(ctx context.Context, id string) (*Delayed, error) {
	return m.delayed.GetDelayed(ctx, id)
}

// ListDelayed returns a page of delayed tasks, newest first, and the total.
func (m *Master) ListDelayed(ctx context.Context, f store.DelayedFilter) ([]Delayed, int, error) {
	return m.delayed.ListDelayed(ctx, f)
}

// DelayedRuns returns a page of a delayed task's runs, newest first.
func (m *Master) DelayedRuns(ctx context.Context, id string, limit, offset int) ([]store.Run, int, error) {
	return m.delayed.DelayedRuns(ctx, id, limit, offset)
}

// CancelDelayed cancels a pending delayed task. A running one (being sent
// now) or a finished one cannot be cancelled: KindState with a sentence.
func (m *Master) CancelDelayed(ctx context.Context, id string) (_ *Delayed, err error) {
	return m.delayed.CancelDelayed(ctx, id)
}

// DelayedCounts counts the delayed tasks by status.
func (m *Master) DelayedCounts(ctx context.Context) (map[string]int, error) {
	return m.delayed.DelayedCounts(ctx)
}
