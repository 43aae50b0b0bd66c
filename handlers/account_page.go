package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// showAccount shows one's own account: every user may change their own
// password and email, viewers too.
func (s *server) showAccount(c *gin.Context) {
	u, vm, ok := s.accountVM(c)
	if !ok {
		return
	}
	vm.Email = u.Email
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.AccountPage(vm))
}

// accountVM loads the logged-in user; false means it already answered (an
// API token has no account).
func (s *server) accountVM(c *gin.Context) (*store.User, views.AccountVM, bool) {
	p := currentUser(c)
	u, err := store.GetUser(c.Request.Context(), s.st.DB, p.Name)
	if errors.Is(err, store.ErrNotFound) {
		s.errorPage(c, http.StatusNotFound, "Only a logged-in user has an account page; "+p.Name+" is not a user.")
		return nil, views.AccountVM{}, false
	}
	if err != nil {
		s.serverError(c, err)
		return nil, views.AccountVM{}, false
	}
	vm := views.AccountVM{Layout: s.layout(c, "Your account", "account"), Username: u.Username, Role: u.Role, Email: u.Email}
	return u, vm, true
}

// changeOwnPassword checks the current password (bcrypt, throttled like the
// login) and stores the new one.
func (s *server) changeOwnPassword(c *gin.Context) {
	u, vm, ok := s.accountVM(c)
	if !ok {
		return
	}
	current := c.PostForm("current_password")
	next, confirm := c.PostForm("new_password"), c.PostForm("new_password_confirm")
	vm.PwErrors = map[string]string{}
	ip := c.ClientIP()
	if wait := s.limiter.blocked(ip, u.Username, time.Now()); wait > 0 {
		vm.PwErrors["current_password"] = fmt.Sprintf("too many wrong passwords; try again in %s", wait.Round(time.Second))
		c.Header("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		s.render(c, http.StatusTooManyRequests, views.AccountPage(vm))
		return
	}
	switch {
	case current == "":
		vm.PwErrors["current_password"] = "is required"
	case len(current) > 256 || bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(current)) != nil:
		s.limiter.fail(ip, u.Username, time.Now())
		s.log.Warn("wrong current password", "username", u.Username, "ip", ip)
		s.userEvent(c, "user.password_change", u.Username, errors.New("the current password is wrong"), "")
		vm.PwErrors["current_password"] = "is wrong"
	}
	if msg := userCheckPassword(next); msg != "" {
		vm.PwErrors["new_password"] = msg
	} else if next == current {
		vm.PwErrors["new_password"] = "must differ from the current password"
	} else if confirm != next {
		vm.PwErrors["new_password_confirm"] = "does not match the new password"
	}
	if len(vm.PwErrors) > 0 {
		vm.Flash = &views.Flash{Message: "Your password was not changed."}
		s.render(c, http.StatusUnprocessableEntity, views.AccountPage(vm))
		return
	}
	hash, err := userHashPassword(next)
	if err != nil {
		s.serverError(c, err)
		return
	}
	if err := store.SetUserPassword(c.Request.Context(), s.st.DB, u.Username, hash); err != nil {
		s.serverError(c, err)
		return
	}
	// Other sessions of this user end; this one goes on with the new password.
	u.PasswordHash = hash
	if err := s.startSession(c, u); err != nil {
		s.serverError(c, err)
		return
	}
	s.log.Info("own password changed", "username", u.Username)
	s.userEvent(c, "user.password_change", u.Username, nil, "")
	s.setFlash(c, true, "Your password was changed.")
	c.Redirect(http.StatusSeeOther, "/account")
}

// changeOwnEmail sets or clears one's own email.
func (s *server) changeOwnEmail(c *gin.Context) {
	u, vm, ok := s.accountVM(c)
	if !ok {
		return
	}
	vm.Email = strings.TrimSpace(c.PostForm("email"))
	if msg := userCheckEmail(vm.Email); msg != "" {
		vm.EmailErrors = map[string]string{"email": msg}
		vm.Flash = &views.Flash{Message: "Your email was not changed."}
		s.render(c, http.StatusUnprocessableEntity, views.AccountPage(vm))
		return
	}
	if err := store.SetUserEmail(c.Request.Context(), s.st.DB, u.Username, vm.Email); err != nil {
		s.serverError(c, err)
		return
	}
	s.log.Info("own email changed", "username", u.Username)
	s.userEvent(c, "user.email_change", u.Username, nil, "")
	if vm.Email == "" {
		s.setFlash(c, true, "Your email was removed.")
	} else {
		s.setFlash(c, true, "Your email is now "+vm.Email+".")
	}
	c.Redirect(http.StatusSeeOther, "/account")
}
