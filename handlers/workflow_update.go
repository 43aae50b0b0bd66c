package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
)

// showEditWorkflow shows the form filled with a workflow's definition.
func (s *server) showEditWorkflow(c *gin.Context) {
	w, ok := s.workflowFor(c, master.ActEdit)
	if !ok {
		return
	}
	vm := s.workflowFormVM(c, w)
	vm.WorkflowFields = form.WorkflowFieldsOf(w)
	s.renderWorkflowForm(c, http.StatusOK, vm, w)
}

// updateWorkflow saves an edit (runs in progress keep the definition they
// started with), or shows the form again with the engine's errors and what
// was typed; an edit that started from a version someone saved over since
// is refused with the engine's sentence, the form kept, and saving again
// saves over that version.
func (s *server) updateWorkflow(c *gin.Context) {
	w, ok := s.workflowFor(c, master.ActEdit)
	if !ok || s.changeWorkflowForm(c, w) {
		return
	}
	vm, in, fe := s.readWorkflowForm(c, w)
	if len(fe) > 0 {
		vm.Errors = fe
		s.renderWorkflowForm(c, http.StatusUnprocessableEntity, vm, w)
		return
	}
	saved, err := s.m.Workflows().Update(c.Request.Context(), w.ID, in)
	if err == nil {
		s.log.Info("workflow edited", "workflow", w.ID, "user", currentUser(c).Name)
		s.setFlash(c, true, tr(c, "FlashWorkflowSaved", "Title", saved.Title))
		c.Redirect(http.StatusSeeOther, "/workflows/"+url.PathEscape(w.ID))
		return
	}
	if errors.Is(err, master.ErrVersionMoved) {
		if cur, gerr := s.m.Workflows().Get(c.Request.Context(), w.ID); gerr == nil {
			vm.Conflict = refusal(c, err)
			vm.Version = strconv.Itoa(cur.Version)
			s.renderWorkflowForm(c, http.StatusConflict, vm, cur)
			return
		}
	}
	status := s.workflowFormError(c, err, &vm)
	if status == 0 {
		return
	}
	s.renderWorkflowForm(c, status, vm, w)
}
