package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// listTasks shows the task list with its filters; htmx gets only the rows.
func (s *server) listTasks(c *gin.Context) {
	vm, err := s.tasksVM(c, nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	if isHX(c) {
		s.render(c, http.StatusOK, views.TasksLive(vm))
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.TasksPage(vm))
}

// taskRows is the live fragment the task list polls (rows and pager), with
// the page's filters.
func (s *server) taskRows(c *gin.Context) {
	vm, err := s.tasksVM(c, nil)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.TasksLive(vm))
}

// tasksError answers a bad filter with a readable 4xx and anything else with 500.
func (s *server) tasksError(c *gin.Context, err error) {
	if st := errorStatus(err); st != 0 {
		s.errorPage(c, st, refusal(c, err))
		return
	}
	s.serverError(c, err)
}

// taskListQuery is the list's filters (and page) as a query string.
func taskListQuery(f views.TaskFilterVM, offset int) url.Values {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Title != "" {
		q.Set("title", f.Title)
	}
	if f.Node != "" {
		q.Set("node", f.Node)
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// tasksVM reads the filters of the request (query string) and loads the page.
func (s *server) tasksVM(c *gin.Context, flash *views.Flash) (views.TasksVM, error) {
	f, err := taskFilter(c)
	if err != nil {
		return views.TasksVM{}, err
	}
	f.Limit = 50
	ctx := c.Request.Context()
	f.Projects = s.currentProjectIDs(c)
	tasks, total, err := s.m.Tasks().List(ctx, f)
	if err != nil {
		return views.TasksVM{}, err
	}
	nodes, err := s.m.Nodes().List(ctx)
	if err != nil {
		return views.TasksVM{}, err
	}
	l := s.layout(c, tr(c, "NavTasks"), "tasks")
	fvm := views.TaskFilterVM{Title: f.Title, Node: f.Node}
	if f.Status != nil {
		fvm.Status = strconv.Itoa(int(*f.Status))
	}
	vm := views.TasksVM{
		Layout: l, Flash: flash, Filter: fvm, Filtered: fvm != (views.TaskFilterVM{}),
		Total: total, Capped: total == master.ListCountCap, PollInterval: s.poll, ShowActions: l.CanOperate,
	}
	for _, n := range nodes {
		if n.Type == master.TypeWorker {
			vm.Nodes = append(vm.Nodes, n.Name)
		}
	}
	if fvm.Node != "" && !contains(vm.Nodes, fvm.Node) {
		vm.Nodes = append(vm.Nodes, fvm.Node)
	}
	now := time.Now()
	ids := make([]string, len(tasks))
	for i := range tasks {
		ids[i] = tasks[i].ID
	}
	// The health of the whole page in one query.
	health, err := s.m.Reads().TasksHealth(ctx, ids, master.HealthWindow)
	if err != nil {
		return views.TasksVM{}, err
	}
	for i := range tasks {
		r := taskRow(lc(c), &tasks[i], now)
		r.Actions = roleActions(r.Actions, l.CanOperate, !l.ReadOnly)
		if h := health[tasks[i].ID]; h != nil {
			r.Failing, r.HealthTitle = h.Failing(), healthTitle(lc(c), h)
			if r.Failing {
				r.FailingTitle = failingText(lc(c), h)
			}
		}
		vm.Rows = append(vm.Rows, r)
	}
	if len(tasks) > 0 {
		vm.From, vm.To = f.Offset+1, f.Offset+len(tasks)
	}
	if f.Offset > 0 {
		vm.PrevURL = withQuery("/tasks", taskListQuery(fvm, max(f.Offset-f.Limit, 0)))
	}
	if f.Offset+len(tasks) < total {
		vm.NextURL = withQuery("/tasks", taskListQuery(fvm, f.Offset+f.Limit))
	}
	here := taskListQuery(fvm, f.Offset)
	vm.RowsURL = withQuery("/tasks/rows", here)
	vm.ActionQuery = withQuery("", here)
	return vm, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// taskActions turns the engine's state table into the buttons a task shows.
// roleActions keeps of a the actions the user's role allows: operators
// start, stop, pause, resume and run; editors also edit and delete.
func roleActions(a views.TaskActions, canOperate, canEdit bool) views.TaskActions {
	if !canOperate {
		a.Start, a.Stop, a.Pause, a.Resume, a.RunOnce = false, false, false, false, false
	}
	if !canEdit {
		a.Edit, a.Delete = false, false
	}
	return a
}

func taskActions(s master.TaskStatus) views.TaskActions {
	var a views.TaskActions
	for _, act := range master.TaskActions(s) {
		switch act {
		case master.TaskStart:
			a.Start = true
		case master.TaskStop:
			a.Stop = true
		case master.TaskPause:
			a.Pause = true
		case master.TaskResume:
			a.Resume = true
		case master.TaskRun:
			a.RunOnce = true
		case master.TaskEdit:
			a.Edit = true
		case master.TaskDelete:
			a.Delete = true
		}
	}
	return a
}

func taskRow(lc *locale.Localizer, t *master.Task, now time.Time) views.TaskRow {
	r := views.TaskRow{
		ID: t.ID, Title: t.Title, Type: t.Type,
		Executors: strings.Join(t.Executors, ", "), Status: int(t.Status), StatusName: t.Status.String(),
		LastResult: t.LastResult, RunCount: t.RunCount, Actions: taskActions(t.Status),
	}
	if t.Selector != "" {
		r.Executors = strings.TrimPrefix(r.Executors+", "+lc.T("TaskSelectorPrefix")+" "+t.Selector, ", ")
	}
	r.Schedule, r.ScheduleZone = scheduleParts(lc, &t.TaskDef)
	r.LastRun, r.LastRunAt = lastRunText(lc, t, now)
	r.NextRun, r.NextRunAt = nextRunText(lc, t, now)
	r.NoExecutor, r.NoExecutorSince = noExecutor(t)
	return r
}

// noExecutor says whether a running task has no running executor, and since when.
func noExecutor(t *master.Task) (bool, string) {
	if t.Runnable {
		return false, ""
	}
	if t.NotRunnableSince == nil {
		return true, ""
	}
	return true, utcText(*t.NotRunnableSince)
}

func lastRunText(lc *locale.Localizer, t *master.Task, now time.Time) (rel, at string) {
	if t.LastRunAt == nil {
		return lc.T("TimeNever"), ""
	}
	return ago(lc, *t.LastRunAt, now), t.LastRunAt.UTC().Format(time.RFC3339)
}

func nextRunText(lc *locale.Localizer, t *master.Task, now time.Time) (rel, at string) {
	switch {
	case t.Status == master.TaskPaused:
		return lc.T("TaskStatusPaused"), ""
	case t.NextRunAt == nil:
		return "-", ""
	}
	return lc.Until(*t.NextRunAt, now), t.NextRunAt.UTC().Format(time.RFC3339)
}

// utcText is the console's way of showing an absolute time.
func utcText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// scheduleText describes a schedule: "cron */5 * * * * * (Europe/Berlin)",
// "every 2s", "once at …".
func scheduleText(lc *locale.Localizer, d *protocol.TaskDef) string {
	expr, zone := scheduleParts(lc, d)
	if zone != "" {
		return expr + " (" + zone + ")"
	}
	return expr
}

// scheduleParts is scheduleText in two parts, the expression (never to be
// wrapped) and the cron's time zone ("" for UTC or another kind).
func scheduleParts(lc *locale.Localizer, d *protocol.TaskDef) (expr, zone string) {
	if d.Schedule.Kind == protocol.ScheduleCron && d.Timezone != "" && d.Timezone != protocol.DefaultTimezone {
		return "cron " + d.Schedule.Cron, d.Timezone
	}
	return scheduleExpr(lc, d), ""
}

func scheduleExpr(lc *locale.Localizer, d *protocol.TaskDef) string {
	switch d.Schedule.Kind {
	case protocol.ScheduleCron:
		if protocol.HasHashed(d.Schedule.Cron) {
			if expr, err := protocol.ExpandHashed(d.Schedule.Cron, d.ID); err == nil && d.ID != "" {
				return "cron " + d.Schedule.Cron + " (= " + expr + ")"
			}
		}
		return "cron " + d.Schedule.Cron
	case protocol.ScheduleInterval:
		every := time.Duration(d.Schedule.Every)
		if d.Schedule.Align == protocol.AlignSpread && d.ID != "" {
			if ph := protocol.IntervalPhase(d.ID, every); ph > 0 {
				return lc.T("ScheduleEveryAt", "Every", lc.Duration(every), "Phase", lc.Duration(ph))
			}
		}
		return lc.T("ScheduleEvery", "Every", lc.Duration(every))
	case protocol.ScheduleOnce:
		if d.Schedule.At != nil {
			return lc.T("ScheduleOnceAt", "At", utcText(*d.Schedule.At))
		}
		return lc.T("ScheduleOnce")
	}
	return d.Schedule.Kind
}
