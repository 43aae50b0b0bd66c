package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// runListPageSize is how many runs the runs page shows at once.
const runListPageSize = 50

// runListTaskChoices bounds the tasks the runs page's task filter suggests
// at once: it searches as one types instead of listing every task.
const runListTaskChoices = 20

// resultParam reads ?result=: "" or a known run result.
func resultParam(c *gin.Context) (string, error) {
	r, msg := resultQuery(c)
	if msg != "" {
		return "", protocol.FieldErrors{"result": msg}
	}
	return r, nil
}

// resultQuery reads the result filter: ?result=, or its other name ?state=
// (a run in progress is state=running); a value that names no result, or
// two names that disagree, give a field error.
func resultQuery(c *gin.Context) (result, msg string) {
	r, st := strings.TrimSpace(c.Query("result")), strings.TrimSpace(c.Query("state"))
	switch {
	case r == "":
		r = st
	case st != "" && st != r:
		return "", "result and state name different results (" + strconv.Quote(r) + ", " + strconv.Quote(st) + "); give one"
	}
	if master.CheckRunResult(r) != nil {
		return "", "must be one of " + strings.Join(master.RunResults(), ", ")
	}
	return r, ""
}

// runFilterInput reads the filters of the runs page and API. The API takes
// times in RFC 3339 only; the console's datetime-local fields are UTC. Bad
// fields are reported by name, and nothing is searched.
func runFilterInput(c *gin.Context, api bool) (master.RunFilter, views.RunFilterVM, protocol.FieldErrors) {
	result, msg := resultQuery(c)
	fvm := views.RunFilterVM{
		Result: result, Node: strings.TrimSpace(c.Query("node")),
		Task: strings.TrimSpace(c.Query("task")), Since: strings.TrimSpace(c.Query("since")), Until: strings.TrimSpace(c.Query("until")),
	}
	f := master.RunFilter{Result: fvm.Result, Node: fvm.Node, TaskID: fvm.Task}
	fe := protocol.FieldErrors{}
	if msg != "" {
		fe["result"] = msg
		fvm.Result = strings.TrimSpace(c.Query("result"))
	}
	if fvm.Node != "" {
		if msg := protocol.ValidateName(fvm.Node); msg != "" {
			fe["node"] = msg
		}
	}
	if len(fvm.Task) > 36 || strings.ContainsAny(fvm.Task, " \t/?#") {
		fe["task"] = "must be a task id"
	}
	for _, p := range []struct {
		field string
		v     string
		dst   *time.Time
	}{{"since", fvm.Since, &f.Since}, {"until", fvm.Until, &f.Until}} {
		if p.v == "" {
			continue
		}
		t, err := parseRunTime(p.v, api)
		if err != nil {
			fe[p.field] = err.Error()
			continue
		}
		*p.dst = t
	}
	if fe["since"] == "" && fe["until"] == "" && !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		fe["until"] = "must be after since"
	}
	f.Limit = runListPageSize
	if v := c.Query("limit"); v != "" && api {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			fe["limit"] = "must be a number from 1 to 500"
		}
		f.Limit = n
	}
	if v := c.Query("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fe["offset"] = "must be a number >= 0"
		}
		f.Offset = max(n, 0)
	}
	return f, fvm, fe
}

// parseRunTime reads a since or until value: RFC 3339 for the API; the
// console's datetime-local (UTC) as well.
func parseRunTime(v string, api bool) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if !api {
		if t, err := form.Time(v); err == nil && t != nil {
			return *t, nil
		}
		return time.Time{}, fmt.Errorf("%q is not a date and time like 2030-01-02T15:04 (UTC)", v)
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time like 2030-01-02T15:04:05Z", v)
}

// runListQuery is the filters (and page) as a query string.
func runListQuery(f views.RunFilterVM, offset int) url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"result", f.Result}, {"node", f.Node}, {"task", f.Task}, {"since", f.Since}, {"until", f.Until}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

// listRuns shows the runs page: every task's runs, filtered, newest first.
// htmx gets the live fragment only.
func (s *server) listRuns(c *gin.Context) {
	f, fvm, fe := runFilterInput(c, false)
	if isHX(c) {
		s.runListLive(c)
		return
	}
	ctx := c.Request.Context()
	vm := views.RunListVM{
		Layout: s.layout(c, tr(c, "NavRuns"), "runs"), Filter: fvm, Filtered: fvm != (views.RunFilterVM{}),
		Results: master.RunResults(),
	}
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		s.serverError(c, err)
		return
	}
	for _, n := range nodes {
		vm.Nodes = append(vm.Nodes, n.Name)
	}
	if fvm.Node != "" && !slices.Contains(vm.Nodes, fvm.Node) {
		vm.Nodes = append(vm.Nodes, fvm.Node)
	}
	if fvm.Task != "" {
		title := fvm.Task
		if titles, err := s.m.Reads().TaskTitles(ctx, []string{fvm.Task}); err == nil && titles[fvm.Task] != "" {
			title = titles[fvm.Task]
		} else if names, err := s.m.Reads().DelayedNames(ctx, []string{fvm.Task}); err == nil && names[fvm.Task].Topic != "" {
			title = tr(c, "RunDelayedFilterTitle", "Topic", names[fvm.Task].Topic, "Key", names[fvm.Task].ContentKey)
		}
		vm.Tasks = append(vm.Tasks, views.TaskLink{ID: fvm.Task, Title: title})
	}
	if len(fe) > 0 {
		vm.Errors = fe
		s.render(c, http.StatusBadRequest, views.RunListPage(vm))
		return
	}
	live, err := s.runListLiveVM(c, f, fvm)
	if master.KindOf(err) == master.KindNotFound {
		vm.Errors = protocol.FieldErrors{"task": "no task has this id"}
		s.render(c, http.StatusBadRequest, views.RunListPage(vm))
		return
	}
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Live = live
	s.render(c, http.StatusOK, views.RunListPage(vm))
}

// runListLive is the live fragment of the runs page, with the page's filters.
// Asked by the pager, it also moves the browser's address to that page.
func (s *server) runListLive(c *gin.Context) {
	f, fvm, fe := runFilterInput(c, false)
	if len(fe) > 0 {
		s.errorPage(c, http.StatusBadRequest, refusal(c, fe))
		return
	}
	vm, err := s.runListLiveVM(c, f, fvm)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.RunListLive(vm))
}

// runListLiveVM loads one page of runs with their tasks' titles.
func (s *server) runListLiveVM(c *gin.Context, f master.RunFilter, fvm views.RunFilterVM) (views.RunListLiveVM, error) {
	ctx := c.Request.Context()
	f.Limit = runListPageSize
	if f.TaskID == "" {
		f.Projects = s.currentProjectIDs(c)
	}
	runs, total, err := s.m.Reads().SearchRuns(ctx, f)
	if err != nil {
		return views.RunListLiveVM{}, err
	}
	rows, err := s.runListRows(c, runs)
	if err != nil {
		return views.RunListLiveVM{}, err
	}
	now := time.Now()
	vm := views.RunListLiveVM{
		Rows: rows, Total: total, Capped: total == master.ListCountCap, PollInterval: s.poll,
		UpdatedAt: now.UTC().Format("15:04:05") + " UTC", Filtered: fvm != (views.RunFilterVM{}),
		RowsURL: withQuery("/runs/live", runListQuery(fvm, f.Offset)),
	}
	if len(runs) > 0 {
		vm.From, vm.To = f.Offset+1, f.Offset+len(runs)
	}
	if f.Offset > 0 {
		prev := max(f.Offset-runListPageSize, 0)
		vm.PrevURL = withQuery("/runs", runListQuery(fvm, prev))
		vm.PrevLiveURL = withQuery("/runs/live", runListQuery(fvm, prev))
	}
	if f.Offset+len(runs) < total {
		vm.NextURL = withQuery("/runs", runListQuery(fvm, f.Offset+runListPageSize))
		vm.NextLiveURL = withQuery("/runs/live", runListQuery(fvm, f.Offset+runListPageSize))
	}
	return vm, nil
}

// runListRows renders runs with the titles of their tasks (one query).
func (s *server) runListRows(c *gin.Context, runs []master.Run) ([]views.RunListRow, error) {
	ids := make([]string, 0, len(runs))
	var delayed []string
	for i := range runs {
		if d := runs[i].DelayedID; d != "" {
			if !slices.Contains(delayed, d) {
				delayed = append(delayed, d)
			}
		} else if !slices.Contains(ids, runs[i].TaskID) {
			ids = append(ids, runs[i].TaskID)
		}
	}
	titles, err := s.m.Reads().TaskTitles(c.Request.Context(), ids)
	if err != nil {
		return nil, err
	}
	// Delayed tasks by their topic and key, not their 32-character id.
	names, err := s.m.Reads().DelayedNames(c.Request.Context(), delayed)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rows := make([]views.RunListRow, len(runs))
	for i := range runs {
		rows[i] = views.RunListRow{RunRow: runRow(lc(c), &runs[i], now), TaskID: runs[i].TaskID, TaskTitle: titles[runs[i].TaskID]}
		if d := runs[i].DelayedID; d != "" {
			rows[i].DelayedID, rows[i].DelayedTopic, rows[i].DelayedKey = d, names[d].Topic, names[d].ContentKey
		}
	}
	return rows, nil
}

// apiSearchRuns answers GET /api/v1/runs?result=&node=&task=&since=&until=&limit=&offset=
// with {"items": [...], "total": N}: the runs of every task, newest first,
// each as GET /api/v1/tasks/{id}/runs shows it. since and until are RFC 3339;
// until is excluded.
func (s *server) apiSearchRuns(c *gin.Context) {
	f, _, fe := runFilterInput(c, true)
	if len(fe) > 0 {
		s.apiError(c, fe)
		return
	}
	f.Preview = true
	var err error
	if f.Projects, err = s.apiProjectFilter(c); err != nil {
		s.apiError(c, err)
		return
	}
	if f.After, err = afterParam(c); err != nil {
		s.apiError(c, err)
		return
	}
	runs, total, err := s.m.Reads().SearchRuns(c.Request.Context(), f)
	if master.KindOf(err) == master.KindNotFound {
		s.apiError(c, protocol.FieldErrors{"task": "no task has this id"})
		return
	}
	if err != nil {
		s.apiError(c, err)
		return
	}
	items := make([]apiRun, len(runs))
	for i := range runs {
		items[i] = toAPIRun(&runs[i])
	}
	c.JSON(http.StatusOK, pageAnswer(items, total, f.Limit, func(r apiRun) (time.Time, string) { return r.StartedAt, r.ID }))
}

// runTaskChoices suggests tasks for the runs page's task filter: those
// whose title holds ?task= (the newest first), readable in the current
// project, at most runListTaskChoices.
func (s *server) runTaskChoices(c *gin.Context) {
	q := strings.TrimSpace(c.Query("task"))
	if len(q) > 200 {
		// Longer than any title: nothing to suggest.
		s.render(c, http.StatusOK, views.RunTaskChoices(nil))
		return
	}
	tasks, _, err := s.m.Tasks().List(c.Request.Context(), master.TaskFilter{Title: q, Limit: runListTaskChoices, CountLimit: 1, Projects: s.currentProjectIDs(c)})
	if err != nil {
		s.serverError(c, err)
		return
	}
	out := make([]views.TaskLink, len(tasks))
	for i, t := range tasks {
		out[i] = views.TaskLink{ID: t.ID, Title: t.Title}
	}
	s.render(c, http.StatusOK, views.RunTaskChoices(out))
}
