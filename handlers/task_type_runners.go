package handlers

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// taskTypeRunners answers GET /tasks/type-runners?type=nats: which running
// workers run tasks of the type, or that none does and the option to
// start one with. HTTP runs everywhere: nothing to say.
func (s *server) taskTypeRunners(c *gin.Context) {
	vm := views.TypeRunnersVM{Type: c.Query("type")}
	if vm.Type == protocol.TaskHTTP || !slices.Contains(protocol.TaskTypes(), vm.Type) {
		vm.Type = ""
		s.render(c, http.StatusOK, views.TypeRunners(vm))
		return
	}
	r, err := s.m.Connections().Runners(c.Request.Context(), vm.Type)
	if err != nil {
		s.fail(c, err)
		return
	}
	vm.Run, vm.Unknown, vm.Refuse = r.Run, r.Unknown, r.Refuse
	s.render(c, http.StatusOK, views.TypeRunners(vm))
}
