package master

import (
	"context"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// FailureGroups groups the failed and timed-out runs since since by task
// (delayed tasks by topic), newest first, at most limit groups, reading at
// most scan failures of each result; complete is false when that cut the
// counts short. Only runs of the projects given (nil: every one) that
// whoever asks may read are counted.
func (r *Reads) FailureGroups(ctx context.Context, since time.Time, scan, limit int, projects []int64) ([]store.FailureGroup, bool, error) {
	return store.FailureGroups(ctx, r.db, since, scan, limit, restrictProjects(ctx, projects))
}

// RunsPerSlot counts runs by UTC slot (minute, hour or day) and result in
// [from, to), of the projects given (nil: every one) that whoever asks may
// read.
func (r *Reads) RunsPerSlot(ctx context.Context, u store.SlotUnit, from, to time.Time, projects []int64) ([]store.DayCount, error) {
	return store.RunsPerSlot(ctx, r.db, u, from, to, restrictProjects(ctx, projects))
}

// FailureGroup is the failures of one task or delayed topic (the dashboard's).
type FailureGroup = store.FailureGroup

// SlotUnit is the length of a chart slot: a minute, an hour or a day.
type SlotUnit = store.SlotUnit

// Slot units of the dashboard's chart ranges.
const (
	SlotMinute = store.SlotMinute
	SlotHour   = store.SlotHour
	SlotDay    = store.SlotDay
)

// DelayedName is a delayed task's topic and content key.
type DelayedName = store.DelayedName

// DelayedNames maps delayed task ids to their topic and key. Only delayed
// tasks whoever asks may read are named.
func (r *Reads) DelayedNames(ctx context.Context, ids []string) (map[string]DelayedName, error) {
	return store.DelayedNamesIn(ctx, r.db, ids, readableProjects(ctx))
}
