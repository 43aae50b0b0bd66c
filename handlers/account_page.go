package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/locale"
	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
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
func (s *server) accountVM(c *gin.Context) (*master.User, views.AccountVM, bool) {
	p := currentUser(c)
	u, err := s.m.Accounts().GetUser(c.Request.Context(), p.Name)
	if master.KindOf(err) == master.KindNotFound {
		s.errorPage(c, http.StatusNotFound, tr(c, "AccountNotAUser", "Name", p.Name))
		return nil, views.AccountVM{}, false
	}
	if err != nil {
		s.serverError(c, err)
		return nil, views.AccountVM{}, false
	}
	vm := views.AccountVM{Layout: s.layout(c, tr(c, "AccountTitle"), "account"), Username: u.Username, Role: u.Role, Email: u.Email, Locale: u.Locale}
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
	err := s.m.Accounts().ChangeOwnPassword(c.Request.Context(), u, ip, current, next, confirm)
	if master.KindOf(err) == master.KindLimited {
		wait := master.RetryAfter(err)
		vm.PwErrors["current_password"] = tr(c, "AccountTooManyWrong", "Wait", lc(c).Duration(wait.Round(time.Second)))
		c.Header("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		s.render(c, http.StatusTooManyRequests, views.AccountPage(vm))
		return
	}
	if errors.Is(err, master.ErrUnauthorized) {
		s.log.Warn("wrong current password", "username", u.Username, "ip", ip)
	}
	if master.Merge(vm.PwErrors, err) {
		vm.Flash = &views.Flash{Message: tr(c, "AccountPasswordNotChanged")}
		s.render(c, http.StatusUnprocessableEntity, views.AccountPage(vm))
		return
	}
	if err != nil {
		s.serverError(c, err)
		return
	}
	// Other sessions of this user end; this one goes on with the new password.
	if err := s.startSession(c, u); err != nil {
		s.serverError(c, err)
		return
	}
	s.setFlash(c, true, tr(c, "FlashPasswordChanged"))
	c.Redirect(http.StatusSeeOther, "/account")
}

// changeOwnEmail sets or clears one's own email.
func (s *server) changeOwnEmail(c *gin.Context) {
	u, vm, ok := s.accountVM(c)
	if !ok {
		return
	}
	vm.Email = strings.TrimSpace(c.PostForm("email"))
	var err error
	if msg := emailDomainProblem(vm.Email); msg != "" {
		err = protocol.FieldErrors{"email": msg}
	} else {
		err = s.m.Accounts().ChangeOwnEmail(c.Request.Context(), u.Username, vm.Email)
	}
	vm.EmailErrors = map[string]string{}
	if master.Merge(vm.EmailErrors, err) {
		vm.Flash = &views.Flash{Message: tr(c, "AccountEmailNotChanged")}
		s.render(c, http.StatusUnprocessableEntity, views.AccountPage(vm))
		return
	}
	if err != nil {
		s.serverError(c, err)
		return
	}
	if vm.Email == "" {
		s.setFlash(c, true, tr(c, "FlashEmailRemoved"))
	} else {
		s.setFlash(c, true, tr(c, "FlashEmailNow", "Email", vm.Email))
	}
	c.Redirect(http.StatusSeeOther, "/account")
}

// changeOwnLocale sets the console language of one's own account: "" follows
// the browser (the switch's cookie, then Accept-Language).
func (s *server) changeOwnLocale(c *gin.Context) {
	u, vm, ok := s.accountVM(c)
	if !ok {
		return
	}
	lang := strings.TrimSpace(c.PostForm("locale"))
	err := s.m.Accounts().ChangeOwnLocale(c.Request.Context(), u.Username, lang)
	vm.LocaleErrors = map[string]string{}
	if master.Merge(vm.LocaleErrors, err) {
		vm.Locale = lang
		vm.Flash = &views.Flash{Message: tr(c, "AccountLanguageNotChanged")}
		s.render(c, http.StatusUnprocessableEntity, views.AccountPage(vm))
		return
	}
	if err != nil {
		s.serverError(c, err)
		return
	}
	// The answer is already in the new language: the next page reads it.
	s.setLocalizer(c, locale.Negotiate(lang, cookieOf(c), c.GetHeader("Accept-Language")))
	s.setFlash(c, true, tr(c, "FlashLanguageSaved"))
	c.Redirect(http.StatusSeeOther, "/account")
}
