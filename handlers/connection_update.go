package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showEditConnection shows the form filled with a connection, its secret
// masked (kept unless changed); for its project's owners (cluster admins
// for one of every project).
func (s *server) showEditConnection(c *gin.Context) {
	cn, ok := s.manageableConnection(c)
	if !ok {
		return
	}
	vm := views.ConnectionFormVM{Layout: s.layout(c, tr(c, "ConnEditHeading", "Name", cn.Name), "connections"), Edit: true, ID: cn.ID,
		ConnectionFields: form.ConnectionFieldsOf(cn)}
	s.renderConnectionForm(c, http.StatusOK, vm)
}

// manageableConnection reads the connection of the path if the user may
// change it; else it answered (not found, forbidden).
func (s *server) manageableConnection(c *gin.Context) (*master.Connection, bool) {
	cn, err := s.m.Connections().Get(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	if !canManageConnection(currentUser(c), cn) {
		if cn.AllProjects {
			s.forbidden(c, "forbidden: only a cluster admin may change nodes, pools, users, settings or projects")
		} else {
			s.forbidden(c, "forbidden: your role in project "+cn.Project+" may not do this")
		}
		return nil, false
	}
	return cn, true
}

// updateConnection saves an edit and shows the connection (its tasks are
// sent again to their workers), or shows the form again with inline
// errors. The project stays; the mask keeps the stored secret.
func (s *server) updateConnection(c *gin.Context) {
	cur, ok := s.manageableConnection(c)
	if !ok {
		return
	}
	fields, in, version, fe := form.Connection(postForm(c))
	fields.Project = form.ConnectionFieldsOf(cur).Project
	vm := views.ConnectionFormVM{Layout: s.layout(c, tr(c, "ConnEditHeading", "Name", cur.Name), "connections"), Edit: true, ID: cur.ID,
		ConnectionFields: fields}
	status := http.StatusUnprocessableEntity
	if len(fe) == 0 {
		saved, err := s.m.Connections().Update(c.Request.Context(), cur.ID, in, version)
		if err == nil {
			s.log.Info("connection edited", "connection", cur.ID, "user", currentUser(c).Name)
			s.setFlash(c, true, tr(c, "FlashConnectionSaved", "Name", saved.Name))
			c.Redirect(http.StatusSeeOther, "/connections/"+url.PathEscape(cur.ID))
			return
		}
		if errors.Is(err, master.ErrVersionMoved) {
			// Another save came first: the form keeps what was typed, and
			// saving again saves over it.
			vm.Version = strconv.FormatInt(cur.Version, 10)
		}
		if status = s.connectionFormError(c, err, &vm); status == 0 {
			return
		}
	} else {
		vm.Errors = fe
	}
	s.renderConnectionForm(c, status, vm)
}
