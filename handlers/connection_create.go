package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showNewConnection shows the empty connection form, in the current
// project, of the kind ?kind= names (the task form's link) or nats.
func (s *server) showNewConnection(c *gin.Context) {
	vm := views.ConnectionFormVM{Layout: s.layout(c, tr(c, "ConnNew"), "connections")}
	vm.Kind = protocol.ConnNATS
	if k := c.Query("kind"); slices.Contains(protocol.ConnectionKinds(), k) {
		vm.Kind = k
	}
	if p := s.currentProject(c); p != nil {
		vm.Project = p.Name
	}
	s.renderConnectionForm(c, http.StatusOK, vm)
}

// createConnection defines a connection from the console form and shows
// it, or shows the form again with inline errors.
func (s *server) createConnection(c *gin.Context) {
	fields, in, _, fe := form.Connection(postForm(c))
	if in.Project == "" && !in.AllProjects {
		if p := s.currentProject(c); p != nil {
			in.Project, fields.Project = p.Name, p.Name
		}
	}
	vm := views.ConnectionFormVM{Layout: s.layout(c, tr(c, "ConnNew"), "connections"), ConnectionFields: fields}
	status := http.StatusUnprocessableEntity
	if len(fe) == 0 {
		cn, err := s.m.Connections().Create(c.Request.Context(), in)
		if err == nil {
			s.log.Info("connection defined", "connection", cn.ID, "name", cn.Name, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashConnectionCreated", "Name", cn.Name))
			c.Redirect(http.StatusSeeOther, "/connections/"+url.PathEscape(cn.ID))
			return
		}
		if status = s.connectionFormError(c, err, &vm); status == 0 {
			return
		}
	} else {
		vm.Errors = fe
	}
	s.renderConnectionForm(c, status, vm)
}

// connectionFormError puts an engine refusal into the form and returns the
// status to answer with; 0: it answered already (an error page: one may
// not, or it does not exist, or it failed).
func (s *server) connectionFormError(c *gin.Context, err error, vm *views.ConnectionFormVM) int {
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		vm.Errors = fe
		return http.StatusUnprocessableEntity
	}
	st := errorStatus(err)
	if k := master.KindOf(err); k == master.KindForbidden || k == master.KindNotFound || st == 0 || st == http.StatusServiceUnavailable {
		s.fail(c, err)
		return 0
	}
	vm.FormError = refusal(c, err)
	return st
}

// renderConnectionForm shows the connection form: a refused one never
// sends a typed secret back (the mask of an edit stays); a new one offers
// the projects the user defines connections in.
func (s *server) renderConnectionForm(c *gin.Context, status int, vm views.ConnectionFormVM) {
	if status != http.StatusOK && vm.Secret != "" && vm.Secret != protocol.SecretMask {
		vm.Secret, vm.SecretRetype = "", true
	}
	u := currentUser(c)
	if !vm.Edit {
		ps, err := s.m.Projects().List(c.Request.Context())
		if err != nil {
			s.fail(c, err)
			return
		}
		for _, p := range ps {
			if u.Can(p.ID, master.ActManage) {
				vm.Projects = append(vm.Projects, p.Name)
			}
		}
		vm.CanAllProjects = u.ClusterAdmin()
	}
	for k, v := range vm.Errors {
		if !views.ConnectionFormSpec.Knows(k) {
			vm.OtherErrors = append(vm.OtherErrors, k+": "+v)
		}
	}
	sort.Strings(vm.OtherErrors)
	s.render(c, status, views.ConnectionFormPage(vm))
}
