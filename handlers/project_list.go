package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// listProjects shows the projects the user may read.
func (s *server) listProjects(c *gin.Context) {
	vm, err := s.projectsVM(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.ProjectsPage(vm))
}

func (s *server) projectsVM(c *gin.Context) (views.ProjectsVM, error) {
	ps, err := s.m.Projects().List(c.Request.Context())
	if err != nil {
		return views.ProjectsVM{}, err
	}
	p := currentUser(c)
	vm := views.ProjectsVM{Layout: s.layout(c, tr(c, "NavProjects"), "projects")}
	for _, pr := range ps {
		vm.Rows = append(vm.Rows, views.ProjectRow{Name: pr.Name, Description: pr.Description,
			Pools: strings.Join(master.ProjectPools(&pr), "; "), Role: string(p.RoleIn(pr.ID))})
	}
	return vm, nil
}

// projectLines reads a textarea of one item per line.
func projectLines(v string) []string {
	out := []string{}
	for _, l := range strings.Split(v, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// createProject creates a project from the console form.
func (s *server) createProject(c *gin.Context) {
	f := views.ProjectFormVM{Name: strings.TrimSpace(c.PostForm("name")), Description: c.PostForm("description"), Pools: c.PostForm("pools")}
	p, err := s.m.Projects().Create(c.Request.Context(), master.ProjectInput{Name: f.Name, Description: f.Description, Pools: projectLines(f.Pools)})
	if err == nil {
		s.setFlash(c, true, tr(c, "FlashProjectCreated", "Name", p.Name))
		c.Redirect(http.StatusSeeOther, "/projects/"+p.Name)
		return
	}
	var fe protocol.FieldErrors
	status := errorStatus(err)
	if !errors.As(err, &fe) {
		if status == 0 || status == http.StatusServiceUnavailable {
			s.serverError(c, err)
			return
		}
		fe = protocol.FieldErrors{"name": refusal(c, err)}
	}
	vm, verr := s.projectsVM(c)
	if verr != nil {
		s.serverError(c, verr)
		return
	}
	vm.Form, vm.Errors = f, fe
	s.render(c, status, views.ProjectsPage(vm))
}

// showProject shows one project: settings and members.
func (s *server) showProject(c *gin.Context) {
	vm, err := s.projectVM(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.ProjectPage(vm))
}

func (s *server) projectVM(c *gin.Context) (views.ProjectPageVM, error) {
	ctx := c.Request.Context()
	p, err := s.m.Projects().Get(ctx, c.Param("name"))
	if err != nil {
		return views.ProjectPageVM{}, err
	}
	ms, err := s.m.Projects().Members(ctx, p.Name)
	if err != nil {
		return views.ProjectPageVM{}, err
	}
	vm := views.ProjectPageVM{Layout: s.layout(c, tr(c, "TitleProject", "Name", p.Name), "projects"), Name: p.Name, Description: p.Description,
		Pools: strings.Join(master.ProjectPools(p), "\n"), Roles: projectRoleNames(), WebhookURL: master.MaskURL(p.WebhookURL),
		CanManage: currentUser(c).Can(p.ID, master.ActManage)}
	for _, m := range ms {
		vm.Members = append(vm.Members, views.MemberRow{Username: m.Username, Role: m.Role, AddedBy: m.AddedBy})
	}
	return vm, nil
}

// updateProject saves a project's settings from its page.
func (s *server) updateProject(c *gin.Context) {
	name := c.Param("name")
	desc, hook := c.PostForm("description"), c.PostForm("webhook_url")
	patch := master.ProjectPatch{Description: &desc, WebhookURL: &hook}
	if _, ok := c.GetPostForm("pools"); ok {
		patch.Pools = projectLines(c.PostForm("pools"))
	}
	_, err := s.m.Projects().Update(c.Request.Context(), name, patch)
	s.afterProjectChange(c, name, err, tr(c, "FlashProjectSaved", "Name", name))
}

// setProjectMember adds a member or changes its role.
func (s *server) setProjectMember(c *gin.Context) {
	name, user := c.Param("name"), strings.TrimSpace(c.PostForm("username"))
	role := master.ProjectRole(strings.TrimSpace(c.PostForm("role")))
	err := s.m.Projects().SetMember(c.Request.Context(), name, user, role)
	s.afterProjectChange(c, name, err, tr(c, "FlashMemberSet", "User", user, "Role", views.ProjectRoleName(c.Request.Context(), string(role)), "Project", name))
}

// removeProjectMember ends a membership.
func (s *server) removeProjectMember(c *gin.Context) {
	name, user := c.Param("name"), c.Param("username")
	err := s.m.Projects().RemoveMember(c.Request.Context(), name, user)
	s.afterProjectChange(c, name, err, tr(c, "FlashMemberRemoved", "User", user, "Project", name))
}

// deleteProject deletes an empty project.
func (s *server) deleteProject(c *gin.Context) {
	name := c.Param("name")
	if err := s.m.Projects().Delete(c.Request.Context(), name); err != nil {
		s.afterProjectChange(c, name, err, "")
		return
	}
	s.setFlash(c, true, tr(c, "FlashProjectDeleted", "Name", name))
	c.Redirect(http.StatusSeeOther, "/projects")
}

// afterProjectChange goes back to the project's page with the outcome; a
// refusal of input shows the page again with the sentence.
func (s *server) afterProjectChange(c *gin.Context, name string, err error, ok string) {
	if err == nil {
		s.setFlash(c, true, ok)
		c.Redirect(http.StatusSeeOther, "/projects/"+name)
		return
	}
	status := errorStatus(err)
	if status == 0 || status == http.StatusServiceUnavailable || status == http.StatusNotFound {
		s.fail(c, err)
		return
	}
	vm, verr := s.projectVM(c)
	if verr != nil {
		s.fail(c, verr)
		return
	}
	var fe protocol.FieldErrors
	if errors.As(err, &fe) {
		vm.Errors = fe
	}
	vm.MemberError = refusal(c, err)
	vm.Flash = &views.Flash{Message: refusal(c, err)}
	s.render(c, status, views.ProjectPage(vm))
}
