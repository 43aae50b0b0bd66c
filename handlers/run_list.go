package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// runsPageSize is how many runs the task page shows at once.
const runsPageSize = 50

// taskRuns is the live fragment of the task page: its status, actions,
// summary and a page of its runs, newest first, all from one read.
func (s *server) taskRuns(c *gin.Context) {
	id := c.Param("id")
	vm, err := s.taskVM(c, id, nil)
	if errors.Is(err, master.ErrNotFound) && isHX(c) {
		// Deleted meanwhile (by someone else), or never readable: 404, and
		// htmx, which follows HX-Redirect whatever the status, says so on
		// the list.
		s.setFlash(c, false, tr(c, "FlashTaskWasDeleted", "ID", id))
		c.Header("HX-Redirect", "/tasks")
		c.Status(http.StatusNotFound)
		return
	}
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.TaskLive(vm))
}

// runsVM loads the page of a task's runs at ?offset=, of the result
// ?result=, with the task's counters from t (the caller's read of the task).
func (s *server) runsVM(c *gin.Context, t *master.Task) (views.RunsVM, error) {
	_, offset, err := pageParams(c)
	if err != nil {
		return views.RunsVM{}, err
	}
	taskID := t.ID
	result, err := resultParam(c)
	if err != nil {
		return views.RunsVM{}, err
	}
	runs, total, err := s.m.Reads().SearchRuns(c.Request.Context(), master.RunFilter{TaskID: taskID, Result: result, Limit: runsPageSize, Offset: offset})
	if err != nil {
		return views.RunsVM{}, err
	}
	base := "/tasks/" + url.PathEscape(taskID)
	vm := views.RunsVM{TaskID: taskID, Total: total, Capped: total == master.ListCountCap, PollInterval: s.poll, LastRun: tr(c, "TimeNever"), NextRun: "-",
		Result: result, Results: master.RunResults(), FilterURL: base + "/runs"}
	now := time.Now()
	vm.StatusName, vm.RunCount, vm.LastResult = t.Status.String(), int64(total), t.LastResult
	// The counters agree with the table: every stored run of the task,
	// those in progress included (the task's own counter counts finished
	// runs, and those the retention removed).
	if result != "" {
		_, all, err := s.m.Reads().SearchRuns(c.Request.Context(), master.RunFilter{TaskID: taskID, Limit: 1})
		if err != nil {
			return views.RunsVM{}, err
		}
		vm.RunCount = int64(all)
	}
	if _, vm.Running, err = s.m.Reads().SearchRuns(c.Request.Context(), master.RunFilter{TaskID: taskID, Result: master.ResultRunning, Limit: 1}); err != nil {
		return views.RunsVM{}, err
	}
	if t.LastRunAt != nil {
		vm.LastRun = ago(lc(c), *t.LastRunAt, now)
	}
	if t.NextRunAt != nil {
		vm.NextRun = t.NextRunAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	for i := range runs {
		vm.Rows = append(vm.Rows, runRow(lc(c), &runs[i], now))
	}
	if len(runs) > 0 {
		vm.From, vm.To = offset+1, offset+len(runs)
	}
	page := func(path string, off int) string {
		q := url.Values{}
		if result != "" {
			q.Set("result", result)
		}
		if off > 0 {
			q.Set("offset", strconv.Itoa(off))
		}
		return withQuery(path, q)
	}
	if offset > 0 {
		vm.PrevURL = page(base, offset-runsPageSize)
	}
	if offset+len(runs) < total {
		vm.NextURL = page(base, offset+runsPageSize)
	}
	vm.RowsURL = page(base+"/runs", offset)
	return vm, nil
}

func runRow(lc *locale.Localizer, r *master.Run, now time.Time) views.RunRow {
	row := views.RunRow{
		ID: r.ID, StartedAt: utcText(r.StartedAt), Started: ago(lc, r.StartedAt, now), Node: r.Node,
		ScheduledAt: utcText(r.ScheduledAt), Duration: durationMS(lc, r.DurationMS), Result: r.Result,
		Attempt: r.Attempt, Code: runCode(lc, r), Manual: r.Manual,
	}
	if !protocol.Result(r.Result).Ended() {
		row.Duration = lc.T("RunFor", "Duration", durationMS(lc, max(0, now.Sub(r.StartedAt).Milliseconds())))
	}
	return row
}

// runCode is "HTTP 200" for an HTTP run, "exit 1" for a shell run, or "".
func runCode(lc *locale.Localizer, r *master.Run) string {
	switch {
	case r.HTTPStatus != 0:
		return "HTTP " + strconv.Itoa(r.HTTPStatus)
	case r.ExitCode != nil:
		return lc.T("RunExit", "Code", *r.ExitCode)
	}
	return ""
}

// durationMS renders a run's duration: "850ms", "2.4s", "3m12s".
func durationMS(lc *locale.Localizer, ms int64) string {
	switch {
	case ms < 1000:
		return lc.T("DurationMS", "MS", ms)
	case ms < 60_000:
		return lc.T("DurationSeconds", "S", fmt.Sprintf("%.1f", float64(ms)/1000))
	}
	return lc.Duration((time.Duration(ms) * time.Millisecond).Round(time.Second))
}
