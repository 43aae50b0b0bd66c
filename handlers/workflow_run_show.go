package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showWorkflowRun shows a workflow run: each step's state, its graph
// coloured by them, Cancel and Rerun failed for operators.
func (s *server) showWorkflowRun(c *gin.Context) {
	vm, err := s.workflowRunVM(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Layout, vm.Flash = s.layout(c, vm.Title, "workflows"), s.takeFlash(c)
	s.render(c, http.StatusOK, views.WorkflowRunPage(vm))
}

// workflowRunLive answers the run page's poll with its live part.
func (s *server) workflowRunLive(c *gin.Context) {
	vm, err := s.workflowRunVM(c)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.WorkflowRunLive(vm))
}

func (s *server) workflowRunVM(c *gin.Context) (views.WorkflowRunVM, error) {
	r, err := s.m.Workflows().Run(c.Request.Context(), c.Param("id"))
	if err != nil {
		return views.WorkflowRunVM{}, err
	}
	operate := currentUser(c).Can(r.ProjectID, master.ActOperate)
	// A queued run starts by itself (its turn comes): it is followed too.
	running := r.Status == store.WorkflowRunning || r.Status == store.WorkflowQueued
	vm := views.WorkflowRunVM{ID: r.ID, WorkflowID: r.WorkflowID, Title: r.Title, Status: r.Status, LogicalTime: utcText(r.LogicalTime),
		StartedAt: utcText(r.StartedAt), EndedAt: "-", StartedBy: r.StartedBy, Trigger: r.Trigger, RerunOf: r.RerunOf,
		Note: r.Note, BackfillID: r.BackfillID,
		InProgress: running, CanCancel: operate && running, CanRerun: operate && !running && r.Status != store.WorkflowSuccess}
	if r.Status == store.WorkflowQueued {
		vm.StartedAt = "-"
	}
	if running {
		vm.LiveURL = "/workflow-runs/" + r.ID + "/live"
	}
	if r.WorkflowID == "" && len(r.Steps) == 1 {
		// A task's backfill: its one step runs the task the page leads back to.
		vm.TaskID = r.Steps[0].TaskID
		titles, err := s.m.Reads().TaskTitles(c.Request.Context(), []string{vm.TaskID})
		if err != nil {
			return vm, err
		}
		vm.TaskTitle = titles[vm.TaskID]
	}
	if r.EndedAt != nil {
		vm.EndedAt = utcText(*r.EndedAt)
	}
	var dag []views.DAGStep
	for _, st := range r.Steps {
		row := views.StepRunRow{Name: st.Name, State: st.State, TaskID: st.TaskID, Run: st.Run, Node: st.Node, Attempt: st.Attempt}
		if st.StartedAt != nil {
			row.StartedAt = utcText(*st.StartedAt)
		}
		if st.EndedAt != nil {
			row.EndedAt = utcText(*st.EndedAt)
		}
		vm.Steps = append(vm.Steps, row)
		ds := views.DAGStep{Name: st.Name, State: st.State}
		for _, e := range st.After {
			ds.After = append(ds.After, views.DAGParent{Step: e.Step, On: e.On})
		}
		dag = append(dag, ds)
	}
	vm.Graph = views.LayoutDAG(dag)
	return vm, nil
}
