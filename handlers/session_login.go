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

// dummyHash keeps the time of a login with an unknown user close to a real one.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not-a-real-password"), bcrypt.DefaultCost)

func (s *server) showLogin(c *gin.Context) {
	s.render(c, http.StatusOK, views.LoginPage(views.LoginVM{Next: safeNext(c.Query("next"))}))
}

// login checks the password (bcrypt), throttles failures per client and
// username, and starts a session.
func (s *server) login(c *gin.Context) {
	username := strings.TrimSpace(c.PostForm("username"))
	password := c.PostForm("password")
	next := safeNext(c.PostForm("next"))
	vm := views.LoginVM{Username: username, Next: next}
	ip := c.ClientIP()
	if wait := s.limiter.blocked(ip, username, time.Now()); wait > 0 {
		vm.Error = fmt.Sprintf("Too many failed logins. Try again in %s.", wait.Round(time.Second))
		c.Header("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		s.render(c, http.StatusTooManyRequests, views.LoginPage(vm))
		return
	}
	if username == "" || password == "" || len(username) > 64 || len(password) > 256 {
		vm.Error = "Enter a username and a password."
		s.render(c, http.StatusBadRequest, views.LoginPage(vm))
		return
	}
	u, err := store.GetUser(c.Request.Context(), s.st.DB, username)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.serverError(c, err)
		return
	}
	hash := dummyHash
	if u != nil {
		hash = []byte(u.PasswordHash)
	}
	pwErr := bcrypt.CompareHashAndPassword(hash, []byte(password))
	if u == nil || pwErr != nil || u.Disabled {
		s.limiter.fail(ip, username, time.Now())
		s.log.Warn("failed login", "username", username, "ip", ip)
		vm.Error = "Wrong username or password."
		s.render(c, http.StatusUnauthorized, views.LoginPage(vm))
		return
	}
	s.limiter.succeed(ip, username)
	if err := s.startSession(c, u); err != nil {
		s.serverError(c, err)
		return
	}
	s.log.Info("login", "username", username, "ip", ip)
	c.Redirect(http.StatusSeeOther, next)
}

// logout ends the session.
func (s *server) logout(c *gin.Context) {
	sess, _ := s.sessions.Get(c.Request, sessionName)
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	if err := sess.Save(c.Request, c.Writer); err != nil {
		s.log.Error("logout", "err", err)
	}
	c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps post-login redirects on this site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/dashboard"
	}
	return next
}
