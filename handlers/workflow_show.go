package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showWorkflow shows a workflow: its schedule, its steps and their graph,
// its backfills and runs; Run now, Pause, Resume and Backfill for
// operators, Edit and Delete for editors.
func (s *server) showWorkflow(c *gin.Context) {
	w, err := s.m.Workflows().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm, err := s.workflowVM(c, w)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.WorkflowPage(vm))
}

// workflowVM is a workflow's page, its backfill form filled with a window
// of the last day.
func (s *server) workflowVM(c *gin.Context, w *master.Workflow) (views.WorkflowVM, error) {
	ctx := c.Request.Context()
	who := currentUser(c)
	lc := lc(c)
	loc := workflowZone(w)
	vm := views.WorkflowVM{Layout: s.layout(c, w.Title, "workflows"), ID: w.ID, Title: w.Title, Key: w.Key,
		Project: w.Project, Version: w.Version, CanRun: who.Can(w.ProjectID, master.ActOperate), CanEdit: who.Can(w.ProjectID, master.ActEdit),
		Params: sortedKV(w.Params), Schedule: workflowScheduleVM(lc, w, loc), BackfillZone: loc.String()}
	if w.Timeout > 0 {
		vm.Timeout = lc.Duration(time.Duration(w.Timeout))
	}
	now := time.Now().Truncate(time.Minute)
	vm.Backfill = views.BackfillFields{From: form.FormatTimeIn(ptr(now.Add(-24*time.Hour)), loc), To: form.FormatTimeIn(&now, loc),
		MaxConcurrent: "1", Order: master.BackfillOldestFirst}
	runs, err := s.m.Workflows().Runs(ctx, w.ID)
	if err != nil {
		return vm, err
	}
	backfills, err := s.m.Workflows().Backfills(ctx, w.ID, "")
	if err != nil {
		return vm, err
	}
	ids := make([]string, 0, len(w.Steps))
	for _, st := range w.Steps {
		ids = append(ids, st.Task)
	}
	titles, err := s.m.Reads().TaskTitles(ctx, ids)
	if err != nil {
		return vm, err
	}
	var dag []views.DAGStep
	for _, st := range w.Steps {
		row := views.WorkflowStepRow{Name: st.Name, TaskID: st.Task, TaskTitle: titles[st.Task]}
		ds := views.DAGStep{Name: st.Name}
		for _, e := range st.After {
			row.After = append(row.After, edgeText(e))
			ds.After = append(ds.After, views.DAGParent{Step: e.Step, On: e.On})
		}
		vm.Steps = append(vm.Steps, row)
		dag = append(dag, ds)
	}
	vm.Graph = views.LayoutDAG(dag)
	for _, b := range backfills {
		vm.Backfills = append(vm.Backfills, backfillRow(lc, &b, loc))
	}
	for _, r := range runs {
		vm.Runs = append(vm.Runs, workflowRunRow(&r))
	}
	return vm, nil
}

// workflowZone is the zone of a workflow's schedule, UTC when it has none
// that loads.
func workflowZone(w *master.Workflow) *time.Location {
	loc, err := protocol.LoadTimezone(w.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// workflowScheduleVM says a workflow's schedule, its window and next fire
// in its zone, and its policies.
func workflowScheduleVM(lc *locale.Localizer, w *master.Workflow, loc *time.Location) views.WorkflowScheduleVM {
	out := views.WorkflowScheduleVM{Zone: loc.String(), Paused: w.Paused}
	if w.Schedule == nil || w.Schedule.Kind == "" {
		return out
	}
	out.Text = scheduleExpr(lc, &protocol.TaskDef{ID: w.ID, Schedule: *w.Schedule, Timezone: w.Timezone})
	out.Overlap, out.Misfire = policyText(lc, "Overlap", w.Overlap), policyText(lc, "Misfire", w.Misfire)
	out.Window = windowText(lc, w.StartAt, w.EndAt, loc)
	if w.NextFire != nil {
		out.NextFire = zoneTime(w.NextFire, loc) + " (" + lc.Until(*w.NextFire, time.Now()) + ")"
		out.NextFireUTC = w.NextFire.UTC().Format(time.RFC3339)
	}
	return out
}

// windowText says a window in loc: from, to, both or "" for none.
func windowText(lc *locale.Localizer, from, to *time.Time, loc *time.Location) string {
	switch {
	case from != nil && to != nil:
		return lc.T("WindowFromTo", "From", zoneTime(from, loc), "To", zoneTime(to, loc))
	case from != nil:
		return lc.T("WindowFrom", "From", zoneTime(from, loc))
	case to != nil:
		return lc.T("WindowUntil", "To", zoneTime(to, loc))
	}
	return ""
}

// zoneTime writes a time in a workflow's zone, with its offset (the
// zone's name is said beside it).
func zoneTime(t *time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 -07:00")
}

func ptr[T any](v T) *T { return &v }

// workflowRunRow is a run in a list of runs.
func workflowRunRow(r *master.WorkflowRun) views.WorkflowRunRow {
	row := views.WorkflowRunRow{ID: r.ID, Status: r.Status, LogicalTime: utcText(r.LogicalTime), StartedAt: utcText(r.StartedAt),
		Trigger: r.Trigger, StartedBy: r.StartedBy, Note: r.Note}
	if r.Status == "queued" {
		row.StartedAt = "-" // it has not started
	}
	if r.EndedAt != nil {
		row.EndedAt = utcText(*r.EndedAt)
	}
	return row
}

// edgeText is an edge as a step's list of parents shows it: the parent,
// and its condition unless success.
func edgeText(e master.StepEdge) string {
	if e.On == "" || e.On == master.OnSuccess {
		return e.Step
	}
	return e.Step + " (" + e.On + ")"
}
