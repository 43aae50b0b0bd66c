package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
)

// projectCookie remembers the console's current project per browser.
const projectCookie = "sm_project"

const ctxProject = "sm.project"

// currentProject is the project the console shows: ?project= when given
// (and readable), else the one remembered in the cookie, else default, else
// the first the user may read; nil when the user may read none. It is
// resolved once per request.
func (s *server) currentProject(c *gin.Context) *master.Project {
	if v, ok := c.Get(ctxProject); ok {
		p, _ := v.(*master.Project)
		return p
	}
	var out *master.Project
	ctx := c.Request.Context()
	if name := c.Query("project"); name != "" {
		// Named explicitly: that one or none, never another in its place.
		if p, err := s.m.Projects().Get(ctx, name); err == nil {
			out = p
		}
		c.Set(ctxProject, out)
		return out
	}
	for _, name := range []string{s.projectCookieValue(c), master.DefaultProject} {
		if name == "" {
			continue
		}
		if p, err := s.m.Projects().Get(ctx, name); err == nil {
			out = p
			break
		}
	}
	if out == nil {
		if ps, err := s.m.Projects().List(ctx); err == nil && len(ps) > 0 {
			out = &ps[0]
		}
	}
	c.Set(ctxProject, out)
	return out
}

func (s *server) projectCookieValue(c *gin.Context) string {
	v, err := c.Cookie(projectCookie)
	if err != nil {
		return ""
	}
	return v
}

// currentProjectIDs is the current project as a list filter: nil (no
// project readable) becomes an empty list, which matches nothing.
func (s *server) currentProjectIDs(c *gin.Context) []int64 {
	if p := s.currentProject(c); p != nil {
		return []int64{p.ID}
	}
	return []int64{}
}

// switchProject makes a project the console's current one and goes back to
// the page the switch was made on (a local path only).
func (s *server) switchProject(c *gin.Context) {
	name := strings.TrimSpace(c.PostForm("project"))
	if _, err := s.m.Projects().Get(c.Request.Context(), name); err != nil {
		s.fail(c, err)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: projectCookie, Value: name, Path: "/", MaxAge: 365 * 24 * 3600,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.sessions.Options.Secure})
	back := safeNext(c.PostForm("back"))
	c.Redirect(http.StatusSeeOther, back)
}

// apiProjectFilter reads the API's optional ?project= list filter: nil
// (every project the caller may read) when absent, the project's id when
// given; a project the caller may not read is a 404.
func (s *server) apiProjectFilter(c *gin.Context) ([]int64, error) {
	name := strings.TrimSpace(c.Query("project"))
	if name == "" {
		return nil, nil
	}
	p, err := s.m.Projects().Get(c.Request.Context(), name)
	if err != nil {
		return nil, err
	}
	return []int64{p.ID}, nil
}

// projectRoleNames are the project roles, most powerful first, for forms.
func projectRoleNames() []string {
	out := make([]string, 0, len(master.ProjectRoles))
	for _, r := range master.ProjectRoles {
		out = append(out, string(r))
	}
	return out
}

// requireTaskAction lets through who may do a to the task :id (the edit and
// clone forms); who may not read it gets the 404 of a missing task.
func (s *server) requireTaskAction(a master.Action) gin.HandlerFunc {
	return func(c *gin.Context) {
		t, err := s.m.Tasks().Get(c.Request.Context(), c.Param("id"))
		if err != nil {
			s.fail(c, err)
			c.Abort()
			return
		}
		if !currentUser(c).Can(t.ProjectID, a) {
			s.forbidden(c, "forbidden: your role in project "+t.Project+" may not do this")
			return
		}
		c.Next()
	}
}
