package handlers

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showConnection shows a connection: its settings (the secret masked), the
// tasks that use it and, for its editors, a test on a running worker.
func (s *server) showConnection(c *gin.Context) {
	vm, err := s.connectionVM(c, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.ConnectionPage(vm))
}

// connectionVM loads a connection's page.
func (s *server) connectionVM(c *gin.Context, id string) (views.ConnectionVM, error) {
	ctx := c.Request.Context()
	cn, err := s.m.Connections().Get(ctx, id)
	if err != nil {
		return views.ConnectionVM{}, err
	}
	u := currentUser(c)
	vm := views.ConnectionVM{
		Layout: s.layout(c, tr(c, "TitleConnection", "Name", cn.Name), "connections"), ConnectionRow: connectionRow(cn),
		Database: cn.Database, Description: cn.Description, Options: sortedKV(cn.Options),
		CreatedBy: cn.CreatedBy, Created: utcText(cn.CreatedAt), Version: cn.Version,
		CanManage: canManageConnection(u, cn), CanTest: canTestConnection(u, cn),
	}
	if t := cn.TLS; t != nil {
		vm.TLS, vm.TLSInsecure, vm.TLSServerName, vm.TLSCA = t.Enabled, t.InsecureSkipVerify, t.ServerName, t.CA != ""
	}
	if vm.UsedBy, err = s.connectionUsers(ctx, cn); err != nil {
		return views.ConnectionVM{}, err
	}
	if vm.CanTest {
		nodes, err := s.m.Nodes().List(ctx)
		if err != nil {
			return views.ConnectionVM{}, err
		}
		for _, n := range nodes {
			if n.Type == master.TypeWorker && n.Status.String() == "running" {
				vm.Nodes = append(vm.Nodes, n.Name)
			}
		}
	}
	return vm, nil
}

// connectionUsers lists the tasks (of the first 500 the user reads where
// it is defined) that use cn: those naming it, in its project, or for one
// of every project, in a project without its own connection of that name.
func (s *server) connectionUsers(ctx context.Context, cn *master.Connection) ([]views.TaskLink, error) {
	f := master.TaskFilter{Limit: 500}
	if !cn.AllProjects {
		f.Projects = []int64{cn.ProjectID}
	}
	tasks, _, err := s.m.Tasks().List(ctx, f)
	if err != nil {
		return nil, err
	}
	own := map[int64]bool{} // projects with their own connection of that name
	if cn.AllProjects {
		list, err := s.m.Connections().List(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, o := range list {
			if !o.AllProjects && o.Name == cn.Name {
				own[o.ProjectID] = true
			}
		}
	}
	var out []views.TaskLink
	for i := range tasks {
		t := &tasks[i]
		if t.ConnectionName() != cn.Name || own[t.ProjectID] {
			continue
		}
		out = append(out, views.TaskLink{ID: t.ID, Title: t.Title})
	}
	return out, nil
}
