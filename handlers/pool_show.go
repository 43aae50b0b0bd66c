package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// poolParam is the pool a route names, "key=value", from its catch-all
// parameter (a key's prefix holds a '/'), without the action suffix given.
func poolParam(c *gin.Context, suffix string) (string, bool) {
	p := strings.TrimPrefix(c.Param("pool"), "/")
	if suffix == "" {
		return p, true
	}
	return strings.CutSuffix(p, suffix)
}

// apiGetPool answers GET /api/v1/pools/{key}={value} with the pool: its
// members, the tasks that select it, its runs and approval; 404 when no
// worker carries the label, no task selects it and it is not approved.
func (s *server) apiGetPool(c *gin.Context) {
	label, _ := poolParam(c, "")
	p, err := s.m.Pools().Get(c.Request.Context(), label)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

// showPool shows one pool's page, /pools/{key}={value}: the Pools page's
// card of it, with more of its members' comings and goings.
func (s *server) showPool(c *gin.Context) {
	label, _ := poolParam(c, "")
	p, err := s.m.Pools().Get(c.Request.Context(), label)
	if err != nil {
		s.tasksError(c, err)
		return
	}
	nodes, err := s.m.Nodes().List(c.Request.Context())
	if err != nil {
		s.serverError(c, err)
		return
	}
	events, err := s.poolEvents(c, []master.Pool{*p}, nodes, poolEventsShown)
	if err != nil {
		s.serverError(c, err)
		return
	}
	l := s.layout(c, tr(c, "TitlePool", "Label", p.Label), "pools")
	vm := views.PoolPageVM{Layout: l, Flash: s.takeFlash(c), ShowActions: l.Admin,
		Pool: poolVM(lc(c), p, events[p.Label], time.Now())}
	s.render(c, http.StatusOK, views.PoolPage(vm))
}
