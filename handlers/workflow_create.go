package handlers

import (
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// showNewWorkflow shows the empty workflow form: one blank step, in the
// current project.
func (s *server) showNewWorkflow(c *gin.Context) {
	vm := s.workflowFormVM(c, nil)
	vm.WorkflowFields = views.WorkflowFields{ScheduleKind: views.ScheduleManual, Overlap: "skip", Misfire: "skip",
		Steps: []views.StepFields{{}}}
	s.renderWorkflowForm(c, http.StatusOK, vm, nil)
}

// createWorkflow stores a new workflow and shows it, or shows the form
// again with the engine's errors beside the fields they name and what was
// typed; a row button (Add step, Remove) changes the form instead.
func (s *server) createWorkflow(c *gin.Context) {
	if s.changeWorkflowForm(c, nil) {
		return
	}
	vm, in, fe := s.readWorkflowForm(c, nil)
	status := http.StatusUnprocessableEntity
	if len(fe) == 0 {
		w, err := s.m.Workflows().Create(c.Request.Context(), in)
		if err == nil {
			s.log.Info("workflow added", "workflow", w.ID, "title", w.Title, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashWorkflowSaved", "Title", w.Title))
			c.Redirect(http.StatusSeeOther, "/workflows/"+url.PathEscape(w.ID))
			return
		}
		if status = s.workflowFormError(c, err, &vm); status == 0 {
			return
		}
	} else {
		vm.Errors = fe
	}
	s.renderWorkflowForm(c, status, vm, nil)
}
