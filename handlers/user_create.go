package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// createUser adds a console user from the Create user form, or shows the
// users page again with inline errors (422) and nothing stored.
func (s *server) createUser(c *gin.Context) {
	f := views.UserCreateVM{
		Username: strings.TrimSpace(c.PostForm("username")),
		Role:     strings.TrimSpace(c.PostForm("role")),
		Email:    strings.TrimSpace(c.PostForm("email")),
		Errors:   map[string]string{},
		Open:     true,
	}
	password, confirm := c.PostForm("password"), c.PostForm("password_confirm")
	u := master.NewUser{Username: f.Username, Role: f.Role, Email: f.Email, Password: password}
	master.Merge(f.Errors, u.Check())
	if msg := emailDomainProblem(f.Email); msg != "" && f.Errors["email"] == "" {
		f.Errors["email"] = msg
	}
	if _, bad := f.Errors["password"]; !bad && confirm != password {
		f.Errors["password_confirm"] = "does not match the password"
	}
	if len(f.Errors) == 0 {
		err := s.m.Accounts().CreateUser(c.Request.Context(), u)
		if err == nil {
			s.setFlash(c, true, tr(c, "FlashUserCreated", "Name", f.Username, "Role", views.ClusterRoleName(c.Request.Context(), f.Role)))
			c.Redirect(http.StatusSeeOther, "/users")
			return
		}
		if !errors.Is(err, master.ErrDuplicate) && !master.Merge(f.Errors, err) {
			s.serverError(c, err)
			return
		}
		if errors.Is(err, master.ErrDuplicate) {
			f.Errors["username"] = "is already taken"
		}
	}
	vm, err := s.usersVM(c, 0)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Create = f
	vm.Flash = &views.Flash{Message: tr(c, "UserNotCreated")}
	s.render(c, http.StatusUnprocessableEntity, views.UsersPage(vm))
}

// emailDomainProblem refuses an address whose domain has no dot, like
// olga@example: valid by RFC 5322, but no mail would reach it, and it is a
// typo every time in a console. "" means fine (or empty, which is "none").
func emailDomainProblem(email string) string {
	at := strings.LastIndex(email, "@")
	if email == "" || at < 0 {
		return ""
	}
	domain := strings.Trim(email[at+1:], ".")
	if strings.HasPrefix(domain, "[") || strings.Contains(domain, ".") {
		return ""
	}
	return "needs a full domain with a dot, like " + email[:at] + "@example.com"
}
