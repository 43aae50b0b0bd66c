package handlers

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// backfillWorkflow starts a backfill of a workflow (operators) from the
// form of its page, its times in the workflow's zone, and shows the
// backfill; refused, the page comes back with the form as typed and the
// engine's errors beside its fields.
func (s *server) backfillWorkflow(c *gin.Context) {
	ctx := c.Request.Context()
	w, ok := s.workflowFor(c, master.ActOperate)
	if !ok {
		return
	}
	fields, in, fe := form.Backfill(postForm(c), workflowZone(w))
	status, refused := http.StatusUnprocessableEntity, ""
	if len(fe) == 0 {
		b, err := s.m.Workflows().BackfillWorkflow(ctx, w.ID, in)
		if err == nil {
			s.log.Info("backfill started", "workflow", w.ID, "backfill", b.ID, "runs", b.Total, "user", currentUser(c).Name)
			s.setFlash(c, true, lc(c).N("FlashBackfillStarted", b.Total))
			c.Redirect(http.StatusSeeOther, "/backfills/"+url.PathEscape(b.ID))
			return
		}
		if !errors.As(err, &fe) {
			if status = errorStatus(err); status == 0 || status == http.StatusForbidden || status == http.StatusNotFound {
				s.fail(c, err)
				return
			}
			refused = refusal(c, err)
		}
	}
	vm, err := s.workflowVM(c, w)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	vm.Backfill, vm.BackfillErrors, vm.BackfillError = fields, fe, refused
	for k, v := range fe {
		if !views.BackfillFormSpec.Knows(k) {
			vm.BackfillError = k + ": " + v
		}
	}
	s.render(c, status, views.WorkflowPage(vm))
}
