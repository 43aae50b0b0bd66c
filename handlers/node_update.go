package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// showEditNode shows the form filled with the node's configuration.
func (s *server) showEditNode(c *gin.Context) {
	n, err := s.m.Nodes().Get(c.Request.Context(), c.Param("name"))
	if err != nil {
		if st := errorStatus(err); st != 0 {
			s.errorPage(c, st, refusal(c, err))
			return
		}
		s.serverError(c, err)
		return
	}
	vm := views.NodeFormVM{
		Layout: s.layout(c, tr(c, "NodeEditHeading", "Name", n.Name), "nodes"), Edit: true, NodeFields: views.NodeFields{Name: n.Name, Protocol: n.Protocol,
			Host: n.Host, Priority: strconv.Itoa(n.Priority), MaxConcurrency: strconv.Itoa(n.MaxConcurrency)},
	}
	vm.Command = s.manualCommand(c, n.Name, n.Host, n.Protocol)
	s.render(c, http.StatusOK, views.NodeFormPage(vm))
}

// updateNode saves an edit, or shows the form again with inline errors.
func (s *server) updateNode(c *gin.Context) {
	vm, cfg, fe := s.readNodeForm(c, true)
	if len(fe) == 0 {
		_, err := s.m.Nodes().Update(c.Request.Context(), vm.Name, cfg)
		if err == nil {
			s.log.Info("node edited", "node", vm.Name, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashNodeSaved", "Name", vm.Name))
			c.Redirect(http.StatusSeeOther, "/nodes")
			return
		}
		if !s.formError(c, err, &vm) {
			return
		}
	} else {
		vm.Errors = fe
	}
	s.render(c, http.StatusUnprocessableEntity, views.NodeFormPage(vm))
}
