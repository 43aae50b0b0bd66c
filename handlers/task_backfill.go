package handlers

import (
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// backfillTask starts a backfill of a task (operators) from the form of its
// page, its times in the task's zone, and shows the backfill; refused, the
// task page says why.
func (s *server) backfillTask(c *gin.Context) {
	ctx, id := c.Request.Context(), c.Param("id")
	t, err := s.m.Tasks().Get(ctx, id)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	loc, lerr := protocol.LoadTimezone(t.Timezone)
	if lerr != nil {
		loc = time.UTC // a zone gone since the save: read the times in UTC
	}
	_, in, fe := form.Backfill(postForm(c), loc)
	if len(fe) == 0 {
		b, err := s.m.Workflows().BackfillTask(ctx, id, in)
		if err == nil {
			s.log.Info("backfill started", "task", id, "backfill", b.ID, "runs", b.Total, "user", currentUser(c).Name)
			s.setFlash(c, true, lc(c).N("FlashBackfillStarted", b.Total))
			c.Redirect(http.StatusSeeOther, "/backfills/"+url.PathEscape(b.ID))
			return
		}
		if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound {
			s.tasksError(c, err)
			return
		}
		s.setFlash(c, false, refusal(c, err))
	} else {
		s.setFlash(c, false, refusal(c, fe))
	}
	c.Redirect(http.StatusSeeOther, "/tasks/"+url.PathEscape(id))
}
