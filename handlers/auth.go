package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/sessions"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

const (
	sessionName = "sm_session"
	ctxUser     = "sm.user"
)

// principal is who is making a request: a console user or an API token.
type principal struct {
	Name string
	Role string
}

// newSessionStore builds the cookie store from keys kept in the database, so a
// restart (or a second master) keeps users logged in.
func newSessionStore(ctx context.Context, st *store.Store, secure bool) (*sessions.CookieStore, error) {
	gen := func() (string, error) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return hex.EncodeToString(b), nil
	}
	var keys [][]byte
	for _, name := range []string{"session_hash_key", "session_block_key"} {
		v, err := store.EnsureSetting(ctx, st.DB, name, gen)
		if err != nil {
			return nil, fmt.Errorf("handlers: session keys: %w", err)
		}
		k, err := hex.DecodeString(v)
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("handlers: stored %s is not 32 hex bytes", name)
		}
		keys = append(keys, k)
	}
	cs := sessions.NewCookieStore(keys[0], keys[1])
	cs.Options = &sessions.Options{
		Path:     "/",
		MaxAge:   int(sessionTTL.Seconds()),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	}
	return cs, nil
}

// requireUser authenticates by bearer token or session cookie. API requests get
// a JSON 401; pages redirect to the login form.
func (s *server) requireUser(api bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, err := s.authenticate(c)
		if err != nil {
			s.log.Error("authenticate", "err", err)
		}
		if p == nil {
			if api {
				c.AbortWithStatusJSON(http.StatusUnauthorized, protocol.ErrorResponse{Error: "authentication required: log in or send Authorization: Bearer <token>"})
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
		c.Request = c.Request.WithContext(master.WithActor(c.Request.Context(), p.Name))
		c.Next()
	}
}

func (s *server) authenticate(c *gin.Context) (*principal, error) {
	ctx := c.Request.Context()
	if h := c.GetHeader("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" {
			return nil, nil
		}
		t, err := store.TokenByHash(ctx, s.st.DB, store.HashToken(tok))
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if time.Since(t.LastUsedAt) > time.Minute {
			if err := store.TouchToken(ctx, s.st.DB, t.ID, time.Now()); err != nil {
				s.log.Warn("touch token", "err", err)
			}
		}
		return &principal{Name: "token:" + t.Name, Role: store.RoleAdmin}, nil
	}
	sess, err := s.sessions.Get(c.Request, sessionName)
	if err != nil {
		return nil, nil // undecodable cookie (e.g. old keys): treat as logged out
	}
	tok, ok := sess.Values["sid"].(string)
	if !ok || tok == "" {
		return nil, nil
	}
	// The server's row is the authority: logout, disable, password and role
	// changes delete it, so a replayed cookie is worthless.
	row, err := store.GetSession(ctx, s.st.DB, store.HashSessionToken(tok), time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, err := store.GetUser(ctx, s.st.DB, row.Username)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, nil
	}
	return &principal{Name: u.Username, Role: u.Role}, nil
}

func currentUser(c *gin.Context) *principal {
	if v, ok := c.Get(ctxUser); ok {
		return v.(*principal)
	}
	return nil
}

// requireAdmin refuses every change to viewers, on pages and API alike.
func (s *server) requireAdmin(c *gin.Context) {
	if p := currentUser(c); p != nil && p.Role == store.RoleAdmin {
		c.Next()
		return
	}
	if wantsJSON(c) {
		c.AbortWithStatusJSON(http.StatusForbidden, protocol.ErrorResponse{Error: "forbidden: your role may not change anything"})
		return
	}
	s.errorPage(c, http.StatusForbidden, "Your role may not change anything.")
}

func (s *server) layout(c *gin.Context, title, active string) views.LayoutVM {
	l := views.LayoutVM{Title: title, Active: active}
	if p := currentUser(c); p != nil {
		l.User, l.Role, l.ReadOnly = p.Name, p.Role, p.Role != store.RoleAdmin
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

// sessionTTL is how long a login lasts without logging in again.
const sessionTTL = 7 * 24 * time.Hour

// startSession makes the request's session belong to u: a new random token in
// the cookie, its hash in the sessions table. A session the request already
// had is ended, so a planted cookie never becomes a logged-in one.
func (s *server) startSession(c *gin.Context, u *store.User) error {
	ctx := c.Request.Context()
	sess, _ := s.sessions.Get(c.Request, sessionName)
	if old, ok := sess.Values["sid"].(string); ok && old != "" {
		if err := store.DeleteSession(ctx, s.st.DB, store.HashSessionToken(old)); err != nil {
			return err
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("handlers: session token: %w", err)
	}
	tok := hex.EncodeToString(b)
	now := time.Now()
	if err := store.CreateSession(ctx, s.st.DB, &store.Session{ID: store.HashSessionToken(tok), Username: u.Username,
		CreatedAt: now, ExpiresAt: now.Add(sessionTTL)}); err != nil {
		return err
	}
	sess.Values = map[any]any{"sid": tok, "at": now.Unix()}
	return sess.Save(c.Request, c.Writer)
}

// endSession deletes the request's session row, if any.
func (s *server) endSession(c *gin.Context) error {
	sess, _ := s.sessions.Get(c.Request, sessionName)
	if tok, ok := sess.Values["sid"].(string); ok && tok != "" {
		return store.DeleteSession(c.Request.Context(), s.st.DB, store.HashSessionToken(tok))
	}
	return nil
}
