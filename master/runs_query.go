package master

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// filterResults are the results a stored run can have: those of ended runs,
// a run in progress, and one lost with its worker.
var filterResults = append(slices.Clone(runResults), store.ResultRunning, store.ResultLost)

// RunResults are the results a run can have, the values a result filter takes.
func RunResults() []string { return slices.Clone(filterResults) }

// CheckRunResult refuses a result filter that names no result.
func CheckRunResult(result string) error {
	if result == "" || slices.Contains(filterResults, result) {
		return nil
	}
	return Errorf(KindInvalid, "result must be one of %s", strings.Join(filterResults, ", "))
}

// RunListSlots bounds the lists of runs read at once. A list carries output
// previews only, but reading a page of 500 runs still reads each run's whole
// record (on SQLite, the pages of its output too, through a page cache of
// some MB per connection): twelve at once cost the master about 95 MB, four
// about 35 MB. Lists past the bound wait their turn; none is refused.
const RunListSlots = 4

// SearchRuns returns a page of the runs matching f across tasks, newest
// first, and how many match. Filtering by a task that never existed is not
// found; a deleted task's runs stay readable.
func (r *Reads) SearchRuns(ctx context.Context, f store.RunFilter) ([]store.Run, int, error) {
	if err := CheckRunResult(f.Result); err != nil {
		return nil, 0, err
	}
	delayed := false
	if f.TaskID != "" && PrincipalFrom(ctx) != nil {
		// Runs of a deleted task stay readable by who may read its project.
		pid, err := store.TaskProject(ctx, r.db, f.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			// The runs of a delayed task name it as their task.
			var d *store.DelayedTask
			if d, err = store.GetDelayed(ctx, r.db, f.TaskID); err == nil {
				pid, delayed = d.ProjectID, true
			}
		}
		if err == nil {
			err = authorize(ctx, pid, ActRead, taskNotFound(f.TaskID))
		} else if errors.Is(err, store.ErrNotFound) {
			err = taskNotFound(f.TaskID)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	f.Projects = restrictProjects(ctx, f.Projects)
	release, err := r.runLists.acquire(ctx, RunListSlots, 0)
	if err != nil {
		return nil, 0, err
	}
	runs, total, err := store.QueryRuns(ctx, r.db, f)
	release()
	if err != nil {
		return nil, 0, err
	}
	if total == 0 && f.TaskID != "" && !delayed {
		if _, err := r.getTask(ctx, f.TaskID); err != nil {
			return nil, 0, err
		}
	}
	return runs, total, nil
}
