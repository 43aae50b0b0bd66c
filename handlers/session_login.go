package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

func (s *server) showLogin(c *gin.Context) {
	s.render(c, http.StatusOK, views.LoginPage(views.LoginVM{Next: safeNext(c.Query("next")), OIDCName: s.oidcName()}))
}

// login checks the password (bcrypt), throttles failures per client and
// username, and starts a session.
func (s *server) login(c *gin.Context) {
	username := strings.TrimSpace(c.PostForm("username"))
	password := c.PostForm("password")
	next := safeNext(c.PostForm("next"))
	vm := views.LoginVM{Username: username, Next: next, OIDCName: s.oidcName()}
	ip := c.ClientIP()
	if username == "" || password == "" || len(username) > 64 || len(password) > 256 {
		vm.Error = tr(c, "LoginEnterBoth")
		s.render(c, http.StatusBadRequest, views.LoginPage(vm))
		return
	}
	u, err := s.m.Accounts().Login(c.Request.Context(), ip, username, password)
	switch master.KindOf(err) {
	case 0, master.KindUnavailable:
		if errors.Is(err, master.ErrDirectoryUnavailable) {
			s.log.Error("login: the directory cannot be reached", "username", username, "err", err)
			c.Header("Retry-After", dbRetryAfter)
			vm.Error = tr(c, "LoginLDAPDown")
			s.render(c, http.StatusServiceUnavailable, views.LoginPage(vm))
			return
		}
		if err != nil {
			s.log.Error("login: the database cannot be reached", "err", err)
			c.Header("Retry-After", dbRetryAfter)
			vm.Error = tr(c, "LoginDBDown")
			s.render(c, http.StatusServiceUnavailable, views.LoginPage(vm))
			return
		}
	case master.KindLimited:
		wait := master.RetryAfter(err)
		s.log.Warn("login throttled", "username", username, "ip", ip)
		vm.Error = tr(c, "LoginTooMany", "Wait", lc(c).Duration(wait.Round(time.Second)))
		c.Header("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		s.render(c, http.StatusTooManyRequests, views.LoginPage(vm))
		return
	case master.KindForbidden:
		// The password was right but the sign-in is refused (no mapped
		// group, a local user of that name): the engine's sentence says why.
		s.log.Warn("login refused", "username", username, "ip", ip, "err", master.Message(err))
		vm.Error = refusal(c, err)
		s.render(c, http.StatusForbidden, views.LoginPage(vm))
		return
	default:
		s.log.Warn("failed login", "username", username, "ip", ip)
		vm.Error = tr(c, "LoginWrong")
		s.render(c, http.StatusUnauthorized, views.LoginPage(vm))
		return
	}
	if err := s.startSession(c, u); err != nil {
		s.serverError(c, err)
		return
	}
	s.log.Info("login", "username", username, "ip", ip)
	c.Redirect(http.StatusSeeOther, next)
}

// logout ends the session on the server and clears the cookie.
func (s *server) logout(c *gin.Context) {
	if err := s.endSession(c); err != nil {
		s.serverError(c, err)
		return
	}
	sess, _ := s.sessions.Get(c.Request, sessionName)
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	if err := sess.Save(c.Request, c.Writer); err != nil {
		s.log.Error("logout", "err", err)
	}
	c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps post-login redirects on this site: only a plain path that
// starts with one "/" and holds no backslash or control character, also once
// decoded (so "/%2F/host" is refused too). Browsers read "/\\host", "/\t/host" and the like as
// another host, so anything unusual goes to the dashboard instead.
func safeNext(next string) string {
	const home = "/dashboard"
	if next == "" || len(next) > 2048 || next[0] != '/' || strings.HasPrefix(next, "//") ||
		strings.ContainsRune(next, '\\') || !utf8.ValidString(next) {
		return home
	}
	for _, r := range next {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return home
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.ContainsRune(u.Path, '\\') {
		return home
	}
	return next
}
