package handlers

import (
	"context"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/handlers/form"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// taskTypeFields answers the task form's type select (GET
// /tasks/type-fields?type=nats[&id=task]): the fields of that type (none
// for HTTP and shell, which the form always holds), its connection select
// offering the connections the task's project sees (the current project's
// for a new task). Back at an edited task's own type, its values return.
func (s *server) taskTypeFields(c *gin.Context) {
	ctx := c.Request.Context()
	vm := views.TaskFormVM{TaskFields: views.TaskFields{Type: c.Query("type")}}
	project := ""
	if id := c.Query("id"); id != "" {
		t, err := s.m.Tasks().Get(ctx, id)
		if err != nil {
			s.fail(c, err)
			return
		}
		project = t.Project
		if t.Type == vm.Type {
			vm.TaskFields = form.TaskFieldsOf(t)
		}
	} else if p := s.currentProject(c); p != nil {
		project = p.Name
	}
	var err error
	if vm.Connections, err = s.connOptions(ctx, vm.Type, project); err != nil {
		s.serverError(c, err)
		return
	}
	s.render(c, http.StatusOK, views.TaskTypeFields(vm))
}

// connOptions are the connections a task of type typ in project may use:
// the project's own of a kind the type takes, and those for every project
// the project has none of its own by that name. A project the user may not
// read offers none.
func (s *server) connOptions(ctx context.Context, typ, project string) ([]views.ConnOption, error) {
	kinds := protocol.ConnectionKindsOf(typ)
	if len(kinds) == 0 {
		return nil, nil
	}
	if project == "" {
		project = master.DefaultProject
	}
	list, err := s.m.Connections().List(ctx, project)
	if err != nil {
		if st := errorStatus(err); st != 0 && st != http.StatusServiceUnavailable {
			return nil, nil
		}
		return nil, err
	}
	own := map[string]bool{}
	for _, cn := range list {
		if !cn.AllProjects {
			own[cn.Name] = true
		}
	}
	var out []views.ConnOption
	for _, cn := range list {
		if !slices.Contains(kinds, cn.Kind) || cn.AllProjects && own[cn.Name] {
			continue
		}
		out = append(out, views.ConnOption{Name: cn.Name, Kind: cn.Kind, Project: cn.Project})
	}
	return out, nil
}
