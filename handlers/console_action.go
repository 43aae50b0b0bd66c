package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// consoleAction ends a console action (a button's post) that err is the
// outcome of: refused before anything was tried (one may not, or it does
// not exist) or failed unexpectedly, it answers with an error page;
// refused by its state, it goes back to back saying why; done, it goes to
// next saying done.
func (s *server) consoleAction(c *gin.Context, err error, back, next, done string) {
	if err != nil {
		if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound || errorStatus(err) == 0 {
			s.fail(c, err)
			return
		}
		s.log.Warn("console action refused", "path", c.Request.URL.Path, "user", currentUser(c).Name, "err", err)
		s.setFlash(c, false, refusal(c, err))
		s.redirect(c, back)
		return
	}
	s.log.Info("console action", "path", c.Request.URL.Path, "user", currentUser(c).Name)
	s.setFlash(c, true, done)
	s.redirect(c, next)
}

// redirect goes to path: htmx (a button with a confirmation) is told to
// load it, a plain form post is redirected.
func (s *server) redirect(c *gin.Context, path string) {
	if isHX(c) {
		c.Header("HX-Redirect", path)
		c.Status(http.StatusOK)
		return
	}
	c.Redirect(http.StatusSeeOther, path)
}
