package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// testConnection asks a running worker (the one chosen, else the first the
// connection's project may use) to reach the connection: htmx gets the
// outcome's fragment for the page, a plain post the page with it.
func (s *server) testConnection(c *gin.Context) {
	id := c.Param("id")
	res, err := s.m.Connections().Test(c.Request.Context(), id, strings.TrimSpace(c.PostForm("node")))
	var vm views.ConnectionTestVM
	status := http.StatusOK
	if err != nil {
		st := errorStatus(err)
		if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound || st == 0 || st == http.StatusServiceUnavailable {
			s.fail(c, err)
			return
		}
		vm.Error, status = refusal(c, err), st
	} else {
		vm = views.ConnectionTestVM{OK: res.OK, Node: res.Node, Message: res.Message, DurationMS: res.DurationMS}
	}
	if isHX(c) {
		s.render(c, status, views.ConnectionTestResult(vm))
		return
	}
	page, err := s.connectionVM(c, id)
	if err != nil {
		s.fail(c, err)
		return
	}
	page.Test = &vm
	s.render(c, status, views.ConnectionPage(page))
}
