package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// apiApprovePool answers POST /api/v1/pools/{key}={value}/approve: new
// workers declaring the label join without per-node approval (when the
// cluster requires approval), and those already waiting are approved. The
// answer is the pool.
func (s *server) apiApprovePool(c *gin.Context) {
	label, ok := poolParam(c, "/approve")
	if !ok {
		s.notFound(c)
		return
	}
	ctx := c.Request.Context()
	if err := s.m.Pools().Approve(ctx, label, currentUser(c).Name); err != nil {
		s.apiError(c, err)
		return
	}
	s.log.Info("pool approved", "pool", label, "user", currentUser(c).Name)
	p, err := s.m.Pools().Get(ctx, label)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

// approvePool approves a pool from the console (the form's pool field,
// "key=value") and leads back with the outcome.
func (s *server) approvePool(c *gin.Context) {
	label := strings.TrimSpace(c.PostForm("pool"))
	ctx := c.Request.Context()
	err := s.m.Pools().Approve(ctx, label, currentUser(c).Name)
	switch {
	case err == nil:
		s.log.Info("pool approved", "pool", label, "user", currentUser(c).Name)
		s.setFlash(c, true, tr(c, "FlashPoolApproved", "Label", label))
	case errorStatus(err) != 0:
		s.setFlash(c, false, refusal(c, err))
	default:
		s.serverError(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, s.poolsRedirect(ctx, label, c.PostForm("from") == "detail"))
}
