package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// ListUsers returns a page of users by name (limit 0: all) and how many
// there are.
//
// Cluster admins and viewers of every project list users; a member of
// projects only may not (it adds members by name).
func (a *Accounts) ListUsers(ctx context.Context, limit, offset int) ([]store.User, int, error) {
	if !mayListUsers(PrincipalFrom(ctx)) {
		return nil, 0, Errorf(KindForbidden, "forbidden: only cluster admins and viewers list users")
	}
	total, err := store.CountUsers(ctx, a.db)
	if err != nil {
		return nil, 0, err
	}
	us, err := store.ListUsers(ctx, a.db, limit, offset)
	return us, total, err
}

// CountActiveAdmins counts the enabled admins (the last one cannot go).
func (a *Accounts) CountActiveAdmins(ctx context.Context) (int, error) {
	return store.CountActiveAdmins(ctx, a.db)
}

// StoredSetting is a setting's value as stored, false when none is (the
// console shows it beside a value pinned by the process configuration).
func (r *Reads) StoredSetting(ctx context.Context, key string) (string, bool, error) {
	v, err := store.GetSetting(ctx, r.db, key)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	return v, err == nil, err
}

// TaskTitles maps task ids to their titles (unknown ids are left out).
// Only titles of tasks whoever asks may read are given.
func (r *Reads) TaskTitles(ctx context.Context, ids []string) (map[string]string, error) {
	return store.TaskTitlesIn(ctx, r.db, ids, readableProjects(ctx))
}

// Dashboard is what the dashboard's counters read at one moment.
type Dashboard struct {
	Tasks      map[store.TaskStatus]int
	NoExecutor int
	RunsToday  []store.DayCount
	// Failures are the failures of the window grouped by task or delayed
	// topic; FailuresComplete is false when their counts were cut short.
	Failures         []FailureGroup
	FailuresComplete bool
	// At is when the counts were read: now, or up to ReadCacheTTL ago for a
	// large estate.
	At time.Time
}

// FailureQuery is what the dashboard's grouped failures read: the
// failures of the last Window, at most Scan of each result, at most Limit
// groups (see FailureGroups).
type FailureQuery struct {
	Window      time.Duration
	Scan, Limit int
}

// ReadDashboard reads the dashboard's counters: task counts, tasks with no
// running executor, today's runs (UTC day of now) and the failures of the
// window grouped. Its counts are of the projects given (nil: every one) that
// whoever asks may read. From LargeEstateRows tasks or runs today on, they
// are kept for ReadCacheTTL and refreshed in the background.
func (r *Reads) ReadDashboard(ctx context.Context, now time.Time, fq FailureQuery, projects []int64) (Dashboard, error) {
	projects = restrictProjects(ctx, projects)
	y, mo, day := now.UTC().Date()
	today := time.Date(y, mo, day, 0, 0, 0, 0, time.UTC)
	key := fmt.Sprintf("dashboard|%s|%s|%d|%d|%s", today.Format(time.DateOnly), fq.Window, fq.Scan, fq.Limit, projectsKey(projects))
	v, at, err := r.cache.get(ctx, key, func(ctx context.Context) (any, int, error) {
		var d Dashboard
		var err error
		if d.Tasks, err = store.CountTasksByStatus(ctx, r.db, projects); err != nil {
			return d, 0, err
		}
		if d.NoExecutor, err = store.CountStrandedTasks(ctx, r.db, projects); err != nil {
			return d, 0, err
		}
		if d.RunsToday, err = store.RunsPerDay(ctx, r.db, today, today.AddDate(0, 0, 1), projects); err != nil {
			return d, 0, err
		}
		if d.Failures, d.FailuresComplete, err = store.FailureGroups(ctx, r.db, r.cache.now().Add(-fq.Window), fq.Scan, fq.Limit, projects); err != nil {
			return d, 0, err
		}
		rows := 0
		for _, n := range d.Tasks {
			rows += n
		}
		runs := 0
		for _, c := range d.RunsToday {
			runs += c.N
		}
		return d, max(rows, runs), nil
	})
	if err != nil {
		return Dashboard{}, err
	}
	d := v.(Dashboard)
	d.At = at
	return d, nil
}
