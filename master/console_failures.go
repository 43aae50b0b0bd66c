package master

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// RunsPerSlot counts runs by UTC slot (minute, hour or day) and result in
// [from, to), of the projects given (nil: every one) that whoever asks may
// read. From LargeEstateRows runs in the range on, the counts are kept for
// ReadCacheTTL and refreshed in the background.
func (r *Reads) RunsPerSlot(ctx context.Context, u store.SlotUnit, from, to time.Time, projects []int64) ([]store.DayCount, error) {
	projects = restrictProjects(ctx, projects)
	key := fmt.Sprintf("runs-per-slot|%v|%s|%s|%s", u, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), projectsKey(projects))
	v, _, err := r.cache.get(ctx, key, func(ctx context.Context) (any, int, error) {
		counts, err := store.RunsPerSlot(ctx, r.db, u, from, to, projects)
		runs := 0
		for _, c := range counts {
			runs += c.N
		}
		return counts, runs, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]store.DayCount), nil
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
