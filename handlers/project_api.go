package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// apiProject is a project in the open API.
type apiProject struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Pools       []string `json:"pools"`
	// WebhookURL is the project's failure webhook, its password masked.
	WebhookURL string    `json:"webhook_url"`
	CreatedBy  string    `json:"created_by"`
	CreatedAt  time.Time `json:"created_at"`
	// Role is the caller's role in the project now.
	Role string `json:"role"`
}

// apiMember is a member of a project in the open API.
type apiMember struct {
	Username string    `json:"username"`
	Role     string    `json:"role"`
	AddedBy  string    `json:"added_by"`
	AddedAt  time.Time `json:"added_at"`
}

func (s *server) toAPIProject(c *gin.Context, p *master.Project) apiProject {
	return apiProject{Name: p.Name, Description: p.Description, Pools: master.ProjectPools(p), WebhookURL: master.MaskURL(p.WebhookURL), CreatedBy: p.CreatedBy,
		CreatedAt: p.CreatedAt.UTC(), Role: string(currentUser(c).RoleIn(p.ID))}
}

// apiListProjects answers GET /api/v1/projects: those the caller may read.
func (s *server) apiListProjects(c *gin.Context) {
	ps, err := s.m.Projects().List(c.Request.Context())
	if err != nil {
		s.apiError(c, err)
		return
	}
	out := make([]apiProject, 0, len(ps))
	for i := range ps {
		out = append(out, s.toAPIProject(c, &ps[i]))
	}
	c.JSON(http.StatusOK, out)
}

// apiGetProject answers GET /api/v1/projects/:name.
func (s *server) apiGetProject(c *gin.Context) {
	p, err := s.m.Projects().Get(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, s.toAPIProject(c, p))
}

// apiCreateProject answers POST /api/v1/projects (cluster admins).
func (s *server) apiCreateProject(c *gin.Context) {
	var in master.ProjectInput
	if !bindJSON(c, &in) {
		return
	}
	p, err := s.m.Projects().Create(c.Request.Context(), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusCreated, s.toAPIProject(c, p))
}

// apiPatchProject answers PATCH /api/v1/projects/:name: description
// (owners), pools (cluster admins).
func (s *server) apiPatchProject(c *gin.Context) {
	var in master.ProjectPatch
	if !bindJSON(c, &in) {
		return
	}
	p, err := s.m.Projects().Update(c.Request.Context(), c.Param("name"), in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, s.toAPIProject(c, p))
}

// apiDeleteProject answers DELETE /api/v1/projects/:name (an empty project).
func (s *server) apiDeleteProject(c *gin.Context) {
	if err := s.m.Projects().Delete(c.Request.Context(), c.Param("name")); err != nil {
		s.apiError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// apiListProjectMembers answers GET /api/v1/projects/:name/members.
func (s *server) apiListProjectMembers(c *gin.Context) {
	ms, err := s.m.Projects().Members(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.apiError(c, err)
		return
	}
	out := make([]apiMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, apiMember{Username: m.Username, Role: m.Role, AddedBy: m.AddedBy, AddedAt: m.AddedAt.UTC()})
	}
	c.JSON(http.StatusOK, out)
}

// memberBody is PUT /api/v1/projects/:name/members/:username.
type memberBody struct {
	Role string `json:"role"`
}

// apiSetProjectMember answers PUT /api/v1/projects/:name/members/:username.
func (s *server) apiSetProjectMember(c *gin.Context) {
	var b memberBody
	if !bindJSON(c, &b) {
		return
	}
	if err := s.m.Projects().SetMember(c.Request.Context(), c.Param("name"), c.Param("username"), master.ProjectRole(b.Role)); err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, memberBody{Role: b.Role})
}

// apiRemoveProjectMember answers DELETE /api/v1/projects/:name/members/:username.
func (s *server) apiRemoveProjectMember(c *gin.Context) {
	if err := s.m.Projects().RemoveMember(c.Request.Context(), c.Param("name"), c.Param("username")); err != nil {
		s.apiError(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
