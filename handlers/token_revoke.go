package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// revokeToken revokes an API token at once.
func (s *server) revokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		s.setFlash(c, false, "No such token.")
		c.Redirect(http.StatusSeeOther, "/tokens")
		return
	}
	switch err := store.RevokeToken(c.Request.Context(), s.st.DB, id); {
	case errors.Is(err, store.ErrNotFound):
		s.setFlash(c, false, "No such active token.")
	case err != nil:
		s.serverError(c, err)
		return
	default:
		s.log.Info("api token revoked", "id", id, "user", currentUser(c).Name)
		s.setFlash(c, true, "Token revoked.")
	}
	c.Redirect(http.StatusSeeOther, "/tokens")
}
