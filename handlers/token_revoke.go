package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// revokeToken revokes an API token at once; the message names it. htmx (the
// button asks for a confirmation naming the token) gets the table back.
func (s *server) revokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		s.tokenOutcome(c, http.StatusNotFound, false, "No such token.")
		return
	}
	name := ""
	ts, err := store.ListTokens(c.Request.Context(), s.st.DB)
	if err != nil {
		s.serverError(c, err)
		return
	}
	for _, t := range ts {
		if t.ID == id {
			name = t.Name
		}
	}
	switch err := store.RevokeToken(c.Request.Context(), s.st.DB, id); {
	case errors.Is(err, store.ErrNotFound):
		msg := "No such active token."
		if name != "" {
			msg = "The token “" + name + "” was already revoked."
		}
		s.tokenOutcome(c, http.StatusConflict, false, msg)
	case err != nil:
		s.serverError(c, err)
	default:
		s.log.Info("api token revoked", "id", id, "name", name, "user", currentUser(c).Name)
		s.tokenOutcome(c, http.StatusOK, true, "Token “"+name+"” revoked: requests with it are refused from now on.")
	}
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
