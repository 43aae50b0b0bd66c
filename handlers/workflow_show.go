package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showWorkflow shows a workflow: its steps and their graph, its runs, and
// Run now for operators.
func (s *server) showWorkflow(c *gin.Context) {
	ctx := c.Request.Context()
	w, err := s.m.Workflows().Get(ctx, c.Param("id"))
	if err != nil {
		s.tasksError(c, err)
		return
	}
	runs, err := s.m.Workflows().Runs(ctx, w.ID)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm := views.WorkflowVM{Layout: s.layout(c, w.Title, "workflows"), Flash: s.takeFlash(c), ID: w.ID, Title: w.Title, Key: w.Key,
		Project: w.Project, Version: w.Version, CanRun: currentUser(c).Can(w.ProjectID, master.ActOperate)}
	ids := make([]string, 0, len(w.Steps))
	for _, st := range w.Steps {
		ids = append(ids, st.Task)
	}
	titles, err := s.m.Reads().TaskTitles(ctx, ids)
	if err != nil {
		s.tasksError(c, err)
		return
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
	for _, r := range runs {
		row := views.WorkflowRunRow{ID: r.ID, Status: r.Status, StartedAt: utcText(r.StartedAt), Trigger: r.Trigger, StartedBy: r.StartedBy}
		if r.EndedAt != nil {
			row.EndedAt = utcText(*r.EndedAt)
		}
		vm.Runs = append(vm.Runs, row)
	}
	s.render(c, http.StatusOK, views.WorkflowPage(vm))
}

// edgeText is an edge as a step's list of parents shows it: the parent,
// and its condition unless success.
func edgeText(e master.StepEdge) string {
	if e.On == "" || e.On == master.OnSuccess {
		return e.Step
	}
	return e.Step + " (" + e.On + ")"
}
