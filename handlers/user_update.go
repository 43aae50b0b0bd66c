package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/store"
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
	u, err := store.GetUser(ctx, s.st.DB, name)
	if errors.Is(err, store.ErrNotFound) {
		s.errorPage(c, http.StatusNotFound, "There is no user "+name+".")
		return views.UserEditVM{}, false
	}
	if err != nil {
		s.serverError(c, err)
		return views.UserEditVM{}, false
	}
	admins, err := store.CountActiveAdmins(ctx, s.st.DB)
	if err != nil {
		s.serverError(c, err)
		return views.UserEditVM{}, false
	}
	return views.UserEditVM{
		Layout: s.layout(c, "User "+u.Username, "users"), Username: u.Username, Role: u.Role, Email: u.Email,
		Disabled: u.Disabled, Self: u.Username == currentUser(c).Name,
		OnlyAdmin: admins == 1 && u.Role == store.RoleAdmin && !u.Disabled,
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
	if msg := userCheckRole(vm.Role); msg != "" {
		vm.Errors["role"] = msg
	}
	if msg := userCheckEmail(vm.Email); msg != "" {
		vm.Errors["email"] = msg
	}
	if len(vm.Errors) > 0 {
		s.render(c, http.StatusUnprocessableEntity, views.UserEditPage(vm))
		return
	}
	err := s.st.DB.RunInTx(c.Request.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		if err := store.UpdateUserRole(ctx, tx, vm.Username, vm.Role); err != nil {
			return err
		}
		return store.SetUserEmail(ctx, tx, vm.Username, vm.Email)
	})
	if err != nil {
		status, msg := userChangeError(err, vm.Username)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		s.log.Warn("user change refused", "username", vm.Username, "by", currentUser(c).Name, "err", err)
		s.userEvent(c, "user.update", vm.Username, errors.New(msg), "role "+vm.Role)
		vm.FormError = "Not saved: " + msg
		s.render(c, status, views.UserEditPage(vm))
		return
	}
	email := vm.Email
	if email == "" {
		email = "none"
	}
	s.log.Info("user updated", "username", vm.Username, "role", vm.Role, "by", currentUser(c).Name)
	s.userEvent(c, "user.update", vm.Username, nil, "role "+vm.Role+", email "+email)
	s.setFlash(c, true, fmt.Sprintf("User %s saved: role %s, email %s.", vm.Username, vm.Role, email))
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
	if msg := userCheckPassword(password); msg != "" {
		vm.PwErrors["password"] = msg
	} else if confirm != password {
		vm.PwErrors["password_confirm"] = "does not match the new password"
	}
	if len(vm.PwErrors) > 0 {
		vm.PwFormError = "The password was not changed."
		s.render(c, http.StatusUnprocessableEntity, views.UserEditPage(vm))
		return
	}
	hash, err := userHashPassword(password)
	if err != nil {
		s.serverError(c, err)
		return
	}
	if err := store.SetUserPassword(c.Request.Context(), s.st.DB, vm.Username, hash); err != nil {
		status, msg := userChangeError(err, vm.Username)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		s.userEvent(c, "user.password_reset", vm.Username, errors.New(msg), "")
		vm.PwFormError = msg
		s.render(c, status, views.UserEditPage(vm))
		return
	}
	s.log.Info("user password reset", "username", vm.Username, "by", currentUser(c).Name)
	s.userEvent(c, "user.password_reset", vm.Username, nil, "")
	s.setFlash(c, true, "Password of "+vm.Username+" reset.")
	c.Redirect(http.StatusSeeOther, "/users")
}

// disableUser disables a user: their session stops working at once.
func (s *server) disableUser(c *gin.Context) { s.userSetDisabled(c, true) }

// enableUser lets a disabled user log in again.
func (s *server) enableUser(c *gin.Context) { s.userSetDisabled(c, false) }

func (s *server) userSetDisabled(c *gin.Context, disabled bool) {
	name := c.Param("username")
	verb := "enable"
	if disabled {
		verb = "disable"
	}
	if disabled && name == currentUser(c).Name {
		s.userEvent(c, "user.disable", name, errors.New(userSelfDisableMsg), "")
		s.userActionDone(c, http.StatusConflict, userSelfDisableMsg)
		return
	}
	if err := store.SetUserDisabled(c.Request.Context(), s.st.DB, name, disabled); err != nil {
		status, msg := userChangeError(err, name)
		if status == 0 {
			s.serverError(c, err)
			return
		}
		s.log.Warn("user change refused", "action", verb, "username", name, "by", currentUser(c).Name, "err", err)
		s.userEvent(c, "user."+verb, name, errors.New(msg), "")
		s.userActionDone(c, status, "Cannot "+verb+" "+name+": "+msg)
		return
	}
	s.log.Info("user "+verb+"d", "username", name, "by", currentUser(c).Name)
	s.userEvent(c, "user."+verb, name, nil, "")
	if disabled {
		s.userActionDone(c, http.StatusOK, "User "+name+" disabled: their sessions end now.")
	} else {
		s.userActionDone(c, http.StatusOK, "User "+name+" enabled.")
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
