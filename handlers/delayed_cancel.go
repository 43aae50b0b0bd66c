package handlers

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// apiCancelDelayed answers POST /api/v1/delayed/{id}/cancel and DELETE
// /api/v1/delayed/{id}: the cancelled task, or 409 saying why it cannot be.
func (s *server) apiCancelDelayed(c *gin.Context) {
	d, err := s.m.Delayed().CancelDelayed(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("delayed task cancelled", "delayed", d.ID, "user", currentUser(c).Name)
	s.answerDelayed(c, http.StatusOK, d)
}

// cancelDelayed cancels a pending delayed task from the console and shows
// the outcome where it was asked: the list (keeping its filters) or the
// task's page (?from=detail).
func (s *server) cancelDelayed(c *gin.Context) {
	id := c.Param("id")
	ok, status, msg := true, http.StatusOK, "Delayed task "+id+" cancelled: it will not be sent."
	if _, err := s.m.Delayed().CancelDelayed(c.Request.Context(), id); err != nil {
		if status = errorStatus(err); status == 0 || status == http.StatusForbidden || status == http.StatusNotFound {
			s.fail(c, err)
			return
		}
		ok, msg = false, "Cancel failed: "+master.Message(err)
		s.log.Warn("delayed cancel refused", "delayed", id, "user", currentUser(c).Name, "err", err)
	}
	fromDetail := c.Query("from") == "detail"
	if !isHX(c) {
		s.setFlash(c, ok, msg)
		back := "/delayed/" + url.PathEscape(id)
		if !fromDetail {
			f, _ := delayedFilter(c)
			back = withQuery("/delayed", delayedListQuery(views.DelayedFilterVM{Status: f.Status, Topic: f.Topic, SourceApp: f.SourceApp}, f.Offset))
		}
		c.Redirect(http.StatusSeeOther, back)
		return
	}
	flash := &views.Flash{OK: ok, Message: msg}
	if fromDetail {
		vm, err := s.delayedVM(c, id, flash)
		if errors.Is(err, master.ErrNotFound) {
			s.render(c, status, views.FlashBox(flash))
			return
		}
		if err != nil {
			s.tasksError(c, err)
			return
		}
		s.render(c, status, views.DelayedDetail(vm))
		return
	}
	vm, err := s.delayedListVM(c, flash)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	s.render(c, status, views.DelayedPanel(vm))
}
