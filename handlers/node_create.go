package handlers

import (
	"errors"
	"maps"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showNewNode shows the empty Add node form.
func (s *server) showNewNode(c *gin.Context) {
	vm := views.NodeFormVM{Layout: s.layout(c, tr(c, "NodeAdd"), "nodes"), NodeFields: views.NodeFields{Protocol: "http", Priority: "1", MaxConcurrency: "20"}}
	vm.Command = s.manualCommand(c, "", "", "http")
	s.render(c, http.StatusOK, views.NodeFormPage(vm))
}

// createNode adds a manual node, or shows the form again with inline errors.
func (s *server) createNode(c *gin.Context) {
	vm, cfg, fe := s.readNodeForm(c, false)
	if len(fe) == 0 {
		_, err := s.m.Nodes().Create(c.Request.Context(), cfg)
		if err == nil {
			s.log.Info("node added", "node", cfg.Name, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashNodeAdded", "Name", cfg.Name))
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

// readNodeForm parses the node form; number fields that do not parse are field errors.
func (s *server) readNodeForm(c *gin.Context, edit bool) (views.NodeFormVM, protocol.NodeConfig, protocol.FieldErrors) {
	title := tr(c, "NodeAdd")
	if edit {
		title = tr(c, "NodeEditHeading", "Name", c.Param("name"))
	}
	v := postForm(c)
	if edit {
		// The name is the page's, whatever the form says.
		v = maps.Clone(v)
		v.Set("name", c.Param("name"))
	}
	fields, cfg, fe := form.Node(v)
	vm := views.NodeFormVM{Layout: s.layout(c, title, "nodes"), Edit: edit, NodeFields: fields}
	vm.Command = s.manualCommand(c, vm.Name, vm.Host, vm.Protocol)
	return vm, cfg, fe
}

// formError puts an engine error into the form; false means it already answered 500.
func (s *server) formError(c *gin.Context, err error, vm *views.NodeFormVM) bool {
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		vm.Errors = fe
		return true
	}
	if errorStatus(err) == 0 {
		s.serverError(c, err)
		return false
	}
	vm.FormError = refusal(c, err)
	return true
}
