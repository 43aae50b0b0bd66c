package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/sessions"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

const (
	sessionName = "sm_session"
	ctxUser     = "sm.user"
)

// principal is who is making a request: a console user, or a user through
// one of their API tokens (Token names it). Its role is the user's role now.
type principal = master.Principal

// newSessionStore builds the cookie store from keys the engine keeps in the
// database, so a restart (or a second master) keeps users logged in.
func newSessionStore(ctx context.Context, m *master.Master, secure bool) (*sessions.CookieStore, error) {
	hashKey, blockKey, err := m.Accounts().SessionKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("handlers: %w", err)
	}
	cs := sessions.NewCookieStore(hashKey, blockKey)
	cs.Options = &sessions.Options{
		Path:     "/",
		MaxAge:   int(master.SessionTTL.Seconds()),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
	return cs, nil
}

// dbUnavailable is what a request whose credentials cannot be checked is
// told: the database did not answer, which is not a reason to log in again.
const dbUnavailable = "the database is unreachable; retrying"

// dbRetryAfter is the Retry-After (seconds) of answers given while the
// database is unreachable.
const dbRetryAfter = "5"

// requireUser authenticates by bearer token or session cookie. API requests get
// a JSON 401; pages redirect to the login form. Credentials that cannot be
// checked (the database is down, or does not answer within authDeadline) get
// 503 and Retry-After, never a logout.
// Every answer behind it is personal, so none may be cached.
func (s *server) requireUser(api bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "no-store")
		p, err := s.authenticate(c)
		if err != nil && master.KindOf(err) != master.KindUnauthorized {
			s.log.Error("authenticate: credentials cannot be checked", "path", c.Request.URL.Path, "err", err)
			c.Header("Retry-After", dbRetryAfter)
			switch {
			case api:
				c.AbortWithStatusJSON(http.StatusServiceUnavailable, protocol.ErrorResponse{Error: dbUnavailable})
			case isHX(c):
				c.Data(http.StatusServiceUnavailable, "text/plain; charset=utf-8", []byte(dbUnavailable))
				c.Abort()
			default:
				s.errorPage(c, http.StatusServiceUnavailable, tr(c, "ErrDBUnreachablePage"))
			}
			return
		}
		if p == nil {
			if api {
				msg := "authentication required: log in or send Authorization: Bearer <token>"
				if err != nil {
					msg = master.Message(err)
				}
				c.AbortWithStatusJSON(http.StatusUnauthorized, protocol.ErrorResponse{Error: msg})
				return
			}
			if isHX(c) {
				c.Header("HX-Redirect", "/login")
				c.AbortWithStatus(http.StatusUnauthorized)
				return
			}
			c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request.URL.RequestURI()))
			c.Abort()
			return
		}
		c.Set(ctxUser, p)
		if p.Locale != "" {
			s.setLocalizer(c, p.Locale)
		}
		// The engine authorizes every call as this principal.
		c.Request = c.Request.WithContext(master.WithPrincipal(c.Request.Context(), p))
		c.Next()
	}
}

// authenticate returns who is asking, nil when nobody is logged in. A bad
// bearer token is a KindUnauthorized refusal saying why; any other error
// means the credentials could not be checked.
func (s *server) authenticate(c *gin.Context) (*principal, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), authDeadline)
	defer cancel()
	if h := c.GetHeader("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" {
			return nil, nil
		}
		return s.m.Accounts().AuthenticateToken(ctx, tok, time.Now())
	}
	sess, err := s.sessions.Get(c.Request, sessionName)
	if err != nil {
		return nil, nil // undecodable cookie (e.g. old keys): treat as logged out
	}
	tok, ok := sess.Values["sid"].(string)
	if !ok || tok == "" {
		return nil, nil
	}
	return s.m.Accounts().AuthenticateSession(ctx, tok, time.Now())
}

func currentUser(c *gin.Context) *principal {
	if v, ok := c.Get(ctxUser); ok {
		return v.(*principal)
	}
	return nil
}

// requireAdmin refuses the cluster's changes (nodes, pools, users,
// settings, projects) to anyone but a cluster admin, on pages and API
// alike; the engine refuses them too.
func (s *server) requireAdmin(c *gin.Context) {
	if p := currentUser(c); p != nil && p.ClusterAdmin() {
		c.Next()
		return
	}
	s.forbidden(c, "forbidden: only a cluster admin may change nodes, pools, users, settings or projects")
}

// forbidden answers 403 with msg, as JSON or a page.
func (s *server) forbidden(c *gin.Context, msg string) {
	if wantsJSON(c) {
		c.AbortWithStatusJSON(http.StatusForbidden, protocol.ErrorResponse{Error: msg})
		return
	}
	s.errorPage(c, http.StatusForbidden, msg)
	c.Abort()
}

// requireClusterReader lets through cluster admins and viewers of every
// project (the users list, the settings page): a member of projects only
// has no business there.
func (s *server) requireClusterReader(c *gin.Context) {
	if p := currentUser(c); p != nil && (p.ClusterAdmin() || (p.Role == master.RoleViewer && p.TokenProject == 0)) {
		c.Next()
		return
	}
	s.forbidden(c, "forbidden: only cluster admins and viewers of every project may see this")
}

// requireProjectAction lets through who may do a in the request's current
// project (the forms that create in it); the engine decides again on submit.
func (s *server) requireProjectAction(a master.Action) gin.HandlerFunc {
	return func(c *gin.Context) {
		proj := s.currentProject(c)
		switch {
		case proj == nil:
			s.fail(c, master.Errorf(master.KindNotFound, "project %s not found", c.Query("project")))
			c.Abort()
		case currentUser(c).Can(proj.ID, a):
			c.Next()
		default:
			s.forbidden(c, "forbidden: your role in project "+proj.Name+" may not do this")
		}
	}
}

func (s *server) layout(c *gin.Context, title, active string) views.LayoutVM {
	l := views.LayoutVM{Title: title, Active: active, Here: c.Request.URL.RequestURI()}
	if c.Request.Method != http.MethodGet {
		l.Here = "/" + strings.Split(strings.TrimPrefix(c.Request.URL.Path, "/"), "/")[0]
	}
	if p := currentUser(c); p != nil {
		l.User, l.Role, l.Admin = p.Name, p.Role, p.ClusterAdmin()
		l.Back = c.Request.URL.Path
		if c.Request.Method != http.MethodGet || strings.Count(l.Back, "/") > 1 {
			l.Back = "/" + strings.Split(strings.TrimPrefix(l.Back, "/"), "/")[0] // a list, not an object of the old project
		}
		l.ClusterReader = l.Admin || p.Role == master.RoleViewer
		if proj := s.currentProject(c); proj != nil {
			l.Project = proj.Name
			l.ProjectRole = string(p.RoleIn(proj.ID))
			l.ReadOnly = !p.Can(proj.ID, master.ActEdit)
			l.CanOperate = p.Can(proj.ID, master.ActOperate)
		} else {
			l.ReadOnly = true
		}
		if ps, err := s.m.Projects().List(c.Request.Context()); err == nil {
			for _, pr := range ps {
				l.Projects = append(l.Projects, pr.Name)
			}
		}
	}
	return l
}

// setFlash keeps an action's outcome for the next page (non-htmx requests).
func (s *server) setFlash(c *gin.Context, ok bool, msg string) {
	sess, _ := s.sessions.Get(c.Request, sessionName)
	kind := "error"
	if ok {
		kind = "ok"
	}
	sess.AddFlash(kind + ":" + msg)
	if err := sess.Save(c.Request, c.Writer); err != nil {
		s.log.Error("save flash", "err", err)
	}
}

// takeFlash pops the pending flash, if any.
func (s *server) takeFlash(c *gin.Context) *views.Flash {
	sess, err := s.sessions.Get(c.Request, sessionName)
	if err != nil {
		return nil
	}
	fl := sess.Flashes()
	if len(fl) == 0 {
		return nil
	}
	if err := sess.Save(c.Request, c.Writer); err != nil {
		s.log.Error("save session", "err", err)
	}
	v, _ := fl[len(fl)-1].(string)
	kind, msg, _ := strings.Cut(v, ":")
	return &views.Flash{OK: kind == "ok", Message: msg}
}

// startSession makes the request's session belong to u: a new token in the
// cookie, its session in the engine. A session the request already had is
// ended, so a planted cookie never becomes a logged-in one.
func (s *server) startSession(c *gin.Context, u *master.User) error {
	sess, _ := s.sessions.Get(c.Request, sessionName)
	old, _ := sess.Values["sid"].(string)
	tok, err := s.m.Accounts().StartSession(c.Request.Context(), u.Username, old)
	if err != nil {
		return err
	}
	sess.Values = map[any]any{"sid": tok, "at": time.Now().Unix()}
	return sess.Save(c.Request, c.Writer)
}

// endSession deletes the request's session row, if any.
func (s *server) endSession(c *gin.Context) error {
	sess, _ := s.sessions.Get(c.Request, sessionName)
	if tok, ok := sess.Values["sid"].(string); ok && tok != "" {
		return s.m.Accounts().EndSession(c.Request.Context(), tok)
	}
	return nil
}
