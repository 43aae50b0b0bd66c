package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/store"
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
	userNewErrors(f.Errors, f.Username, f.Role, f.Email, password)
	if _, bad := f.Errors["password"]; !bad && confirm != password {
		f.Errors["password_confirm"] = "does not match the password"
	}
	if len(f.Errors) == 0 {
		err := s.userInsert(c, f.Username, f.Role, f.Email, password)
		if err == nil {
			s.setFlash(c, true, fmt.Sprintf("User %s created (%s).", f.Username, f.Role))
			c.Redirect(http.StatusSeeOther, "/users")
			return
		}
		if !errors.Is(err, store.ErrDuplicate) {
			s.serverError(c, err)
			return
		}
		f.Errors["username"] = "is already taken"
	}
	vm, err := s.usersVM(c, 0)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Create = f
	vm.Flash = &views.Flash{Message: "The user was not created: correct the fields marked below."}
	s.render(c, http.StatusUnprocessableEntity, views.UsersPage(vm))
}

// userNewErrors puts what is wrong with a new user's fields into fe.
func userNewErrors(fe map[string]string, username, role, email, password string) {
	for field, msg := range map[string]string{
		"username": userCheckUsername(username),
		"role":     userCheckRole(role),
		"email":    userCheckEmail(email),
		"password": userCheckPassword(password),
	} {
		if msg != "" {
			fe[field] = msg
		}
	}
}

// userInsert hashes the password and stores the new user; a taken name gives
// store.ErrDuplicate.
func (s *server) userInsert(c *gin.Context, username, role, email, password string) error {
	// A taken name is refused before the (deliberately slow) hashing; the
	// unique key still decides a race.
	switch _, err := store.GetUser(c.Request.Context(), s.st.DB, username); {
	case err == nil:
		return fmt.Errorf("handlers: user %q: %w", username, store.ErrDuplicate)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	hash, err := userHashPassword(password)
	if err != nil {
		return err
	}
	u := &store.User{Username: username, PasswordHash: hash, Role: role, Email: email}
	if err := store.CreateUser(c.Request.Context(), s.st.DB, u); err != nil {
		return err
	}
	s.log.Info("user created", "username", username, "role", role, "by", currentUser(c).Name)
	s.userEvent(c, "user.create", username, nil, "role "+role)
	return nil
}
