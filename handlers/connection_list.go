package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// listConnections shows the connections the user reads: those of the
// projects they read and those for every project; ?project= narrows it to
// one project's (and those for every project).
func (s *server) listConnections(c *gin.Context) {
	ctx := c.Request.Context()
	project := strings.TrimSpace(c.Query("project"))
	list, err := s.m.Connections().List(ctx, project)
	if err != nil {
		s.fail(c, err)
		return
	}
	vm := views.ConnectionsVM{Layout: s.layout(c, tr(c, "NavConnections"), "connections"), Project: project}
	for i := range list {
		vm.Rows = append(vm.Rows, connectionRow(&list[i]))
	}
	ps, err := s.m.Projects().List(ctx)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, p := range ps {
		vm.Projects = append(vm.Projects, p.Name)
	}
	u := currentUser(c)
	vm.CanCreate = u.ClusterAdmin()
	if p := s.currentProject(c); p != nil && u.Can(p.ID, master.ActManage) {
		vm.CanCreate = true
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.ConnectionsPage(vm))
}

// connectionRow is a connection's line of the list (and the top of its
// page): its secret is only said to be set.
func connectionRow(cn *master.Connection) views.ConnectionRow {
	return views.ConnectionRow{ID: cn.ID, Name: cn.Name, Kind: cn.Kind, Address: cn.Address, User: cn.User,
		Project: cn.Project, AllProjects: cn.AllProjects, SecretSet: cn.Secret != "", Updated: utcText(cn.UpdatedAt)}
}

// canManageConnection reports whether u may edit and delete cn: its
// project's owners, cluster admins for one of every project.
func canManageConnection(u *principal, cn *master.Connection) bool {
	if cn.AllProjects {
		return u.ClusterAdmin()
	}
	return u.Can(cn.ProjectID, master.ActManage)
}

// canTestConnection reports whether u may test cn: its project's editors,
// cluster admins for one of every project.
func canTestConnection(u *principal, cn *master.Connection) bool {
	if cn.AllProjects {
		return u.ClusterAdmin()
	}
	return u.Can(cn.ProjectID, master.ActEdit)
}
