package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showEditUser shows an admin's page for one user.
func (s *server) showEditUser(c *gin.Context) {
	vm, ok := s.userEditVM(c)
	if !ok {
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.UserEditPage(vm))
}

// userEditVM loads the user named in the path; false means it already answered.
func (s *server) userEditVM(c *gin.Context) (views.UserEditVM, bool) {
	ctx := c.Request.Context()
	name := c.Param("username")
	u, err := s.m.Accounts().GetUser(ctx, name)
	if master.KindOf(err) == master.KindNotFound {
		s.errorPage(c, http.StatusNotFound, tr(c, "UserNoSuch", "Name", name))
		return views.UserEditVM{}, false
	}
	if err != nil {
		s.serverError(c, err)
		return views.UserEditVM{}, false
	}
	admins, err := s.m.Accounts().CountActiveAdmins(ctx)
	if err != nil {
		s.serverError(c, err)
		return views.UserEditVM{}, false
	}
	return views.UserEditVM{
		Layout: s.layout(c, tr(c, "UserHeading", "Name", u.Username), "users"), Username: u.Username, Role: u.Role, Email: u.Email,
		Disabled: u.Disabled, Self: u.Username == currentUser(c).Name,
		OnlyAdmin: admins == 1 && u.Role == master.RoleAdmin && !u.Disabled,
	}, true
}

// updateUser saves a user's role and email from the edit page.
func (s *server) updateUser(c *gin.Context) {
	vm, ok := s.userEditVM(c)
	if !ok {
		return
	}
	vm.Role = strings.TrimSpace(c.PostForm("role"))
	vm.Email = strings.TrimSpace(c.PostForm("email"))
	vm.Errors = map[string]string{}
	if msg := emailDomainProblem(vm.Email); msg != "" {
		vm.Errors["email"] = msg
		s.render(c, http.StatusUnprocessableEntity, views.UserEditPage(vm))
		return
	}
	err := s.m.Accounts().PatchUser(c.Request.Context(), vm.Username, master.UserPatch{Role: &vm.Role, Email: &vm.Email})
	if master.Merge(vm.Errors, err) {
		s.render(c, http.StatusUnprocessableEntity, views.UserEditPage(vm))
		return
	}
	if err != nil {
		status := errorStatus(err)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		vm.FormError = tr(c, "NotSaved", "Reason", refusal(c, err))
		s.render(c, status, views.UserEditPage(vm))
		return
	}
	email := vm.Email
	if email == "" {
		email = "none"
	}
	s.setFlash(c, true, tr(c, "FlashUserSaved", "Name", vm.Username, "Role", views.ClusterRoleName(c.Request.Context(), vm.Role), "Email", email))
	c.Redirect(http.StatusSeeOther, "/users")
}

// resetUserPassword sets a new password chosen by an admin.
func (s *server) resetUserPassword(c *gin.Context) {
	vm, ok := s.userEditVM(c)
	if !ok {
		return
	}
	password, confirm := c.PostForm("password"), c.PostForm("password_confirm")
	vm.PwErrors = map[string]string{}
	if msg := master.CheckPassword(password); msg != "" {
		vm.PwErrors["password"] = msg
	} else if confirm != password {
		vm.PwErrors["password_confirm"] = "does not match the new password"
	}
	if len(vm.PwErrors) > 0 {
		vm.PwFormError = tr(c, "PasswordNotChanged")
		s.render(c, http.StatusUnprocessableEntity, views.UserEditPage(vm))
		return
	}
	if err := s.m.Accounts().ResetPassword(c.Request.Context(), vm.Username, password); err != nil {
		status := errorStatus(err)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		vm.PwFormError = refusal(c, err)
		s.render(c, status, views.UserEditPage(vm))
		return
	}
	s.setFlash(c, true, tr(c, "FlashPasswordReset", "Name", vm.Username))
	c.Redirect(http.StatusSeeOther, "/users")
}

// disableUser disables a user: their session stops working at once.
func (s *server) disableUser(c *gin.Context) { s.userSetDisabled(c, true) }

// enableUser lets a disabled user log in again.
func (s *server) enableUser(c *gin.Context) { s.userSetDisabled(c, false) }

func (s *server) userSetDisabled(c *gin.Context, disabled bool) {
	name := c.Param("username")
	verb := tr(c, "UserVerbEnable")
	if disabled {
		verb = tr(c, "UserVerbDisable")
	}
	if err := s.m.Accounts().SetUserDisabled(c.Request.Context(), name, disabled); err != nil {
		status := errorStatus(err)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		s.userActionDone(c, status, tr(c, "UserCannot", "Verb", verb, "Name", name, "Reason", refusal(c, err)))
		return
	}
	if disabled {
		s.userActionDone(c, http.StatusOK, tr(c, "FlashUserDisabled", "Name", name))
	} else {
		s.userActionDone(c, http.StatusOK, tr(c, "FlashUserEnabled", "Name", name))
	}
}

// userActionDone answers a list action (disable, enable): the outcome goes
// into the flash of the users page. htmx is sent there with HX-Redirect; a
// plain form post gets 303 on success, or the page itself with the error
// status on a refusal.
func (s *server) userActionDone(c *gin.Context, status int, msg string) {
	ok := status == http.StatusOK
	if isHX(c) {
		s.setFlash(c, ok, msg)
		c.Header("HX-Redirect", "/users")
		c.Status(http.StatusOK)
		return
	}
	if ok {
		s.setFlash(c, true, msg)
		c.Redirect(http.StatusSeeOther, "/users")
		return
	}
	vm, err := s.usersVM(c, 0)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Flash = &views.Flash{Message: msg}
	s.render(c, status, views.UsersPage(vm))
}
