package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// apiRevokePool answers DELETE /api/v1/pools/{key}={value}/approve with 204:
// the pool's approval is withdrawn and its members stay; 404 when it was not
// approved.
func (s *server) apiRevokePool(c *gin.Context) {
	label, ok := poolParam(c, "/approve")
	if !ok {
		s.notFound(c)
		return
	}
	if err := s.m.Pools().Revoke(c.Request.Context(), label); err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("pool approval revoked", "pool", label, "user", currentUser(c).Name)
	c.Status(http.StatusNoContent)
}

// revokePool withdraws a pool's approval from the console (the form's pool
// field) and leads back with the outcome.
func (s *server) revokePool(c *gin.Context) {
	label := strings.TrimSpace(c.PostForm("pool"))
	ctx := c.Request.Context()
	err := s.m.Pools().Revoke(ctx, label)
	switch {
	case err == nil:
		s.log.Info("pool approval revoked", "pool", label, "user", currentUser(c).Name)
		s.setFlash(c, true, tr(c, "FlashPoolRevoked", "Label", label))
	case errorStatus(err) != 0:
		s.setFlash(c, false, refusal(c, err))
	default:
		s.serverError(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, s.poolsRedirect(ctx, label, c.PostForm("from") == "detail"))
}
