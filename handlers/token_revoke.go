package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// revokeToken revokes an API token at once; the message names it. htmx (the
// button asks for a confirmation naming the token) gets the table back.
func (s *server) revokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		s.tokenOutcome(c, http.StatusNotFound, false, tr(c, "TokenNoSuch"))
		return
	}
	t, err := s.m.Accounts().RevokeToken(c.Request.Context(), id)
	if err != nil {
		status := errorStatus(err)
		if status == 0 || status == http.StatusNotFound || status == http.StatusForbidden {
			s.fail(c, err)
			return
		}
		s.tokenOutcome(c, status, false, tr(c, "Sentence", "Msg", refusal(c, err)))
		return
	}
	s.log.Info("api token revoked", "id", id, "name", t.Name, "user", currentUser(c).Name)
	s.tokenOutcome(c, http.StatusOK, true, tr(c, "FlashTokenRevoked", "Name", t.Name))
}

// apiRevokeToken revokes an API token: 200 with the token, 404 unknown, 409
// already revoked.
func (s *server) apiRevokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		c.JSON(http.StatusNotFound, gin.H{"error": "there is no API token " + strconv.Quote(c.Param("id"))})
		return
	}
	t, err := s.m.Accounts().RevokeToken(c.Request.Context(), id)
	if err != nil {
		s.apiError(c, err)
		return
	}
	names, _ := s.m.Projects().Names(c.Request.Context())
	c.JSON(http.StatusOK, toAPIToken(t, time.Now(), names))
}

// tokenOutcome ends a token action: htmx gets the table with the message, a
// plain form post is redirected to the page with the message kept.
func (s *server) tokenOutcome(c *gin.Context, status int, ok bool, msg string) {
	if !isHX(c) {
		s.setFlash(c, ok, msg)
		c.Redirect(http.StatusSeeOther, "/tokens")
		return
	}
	vm, err := s.tokensVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Flash = &views.Flash{OK: ok, Message: msg}
	s.render(c, status, views.TokensPanel(vm))
}
