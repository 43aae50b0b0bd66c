package master

import (
	"context"
	"errors"
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
	Failures   []store.FailedRun
}

// ReadDashboard reads the dashboard's counters: task counts, tasks with no
// running executor, today's runs (UTC day of now) and the latest failures.
// Its counts are of the projects given (nil: every one) that whoever asks
// may read.
func (r *Reads) ReadDashboard(ctx context.Context, now time.Time, failures int, projects []int64) (Dashboard, error) {
	var d Dashboard
	var err error
	projects = restrictProjects(ctx, projects)
	if d.Tasks, err = store.CountTasksByStatus(ctx, r.db, projects); err != nil {
		return d, err
	}
	if d.NoExecutor, err = store.CountStrandedTasks(ctx, r.db, projects); err != nil {
		return d, err
	}
	y, mo, day := now.UTC().Date()
	today := time.Date(y, mo, day, 0, 0, 0, 0, time.UTC)
	if d.RunsToday, err = r.RunsPerDay(ctx, today, today.AddDate(0, 0, 1), projects); err != nil {
		return d, err
	}
	d.Failures, err = store.LatestFailures(ctx, r.db, failures, projects)
	return d, err
}

// RunsPerDay counts runs by UTC day and result in [from, to), of the
// projects given (nil: every one) that whoever asks may read.
func (r *Reads) RunsPerDay(ctx context.Context, from, to time.Time, projects []int64) ([]store.DayCount, error) {
	return store.RunsPerDay(ctx, r.db, from, to, restrictProjects(ctx, projects))
}
