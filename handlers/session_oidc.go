package handlers

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"

	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gin-gonic/gin"
	"golang.org/x/oauth2"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// OIDCConfig is sign-on with an OpenID Connect provider (authorization code
// flow with PKCE). Parsed and checked in cmd/; nil means no OIDC.
type OIDCConfig struct {
	Issuer       string // discovery: Issuer + "/.well-known/openid-configuration"
	ClientID     string
	ClientSecret string
	RedirectURL  string // this master's PathOIDCCallback as the browser reaches it
	DisplayName  string // the button says "Sign in with <DisplayName>"
	Scopes       []string
	// UsernameClaim and GroupsClaim name the ID token claims read.
	// The groups' roles are the engine's (master.Config.OIDC).
	UsernameClaim, GroupsClaim string
	// HTTPClient talks to the provider (nil: http.DefaultClient); Now is the
	// clock tokens are checked against (nil: time.Now). Both are for tests.
	HTTPClient *http.Client
	Now        func() time.Time
}

// Paths of OIDC sign-on.
const (
	PathOIDCStart    = "/login/oidc"
	PathOIDCCallback = "/login/oidc/callback"
)

// oidcCookie keeps state, nonce and PKCE verifier of one sign-in in the
// browser that started it, signed and encrypted, for oidcFlowTTL.
const (
	oidcCookie  = "sm_oidc"
	oidcFlowTTL = 10 * time.Minute
)

// oidcClient is the discovered provider; discovery is retried on the next
// sign-in when the provider was down, so a master starts without it.
type oidcClient struct {
	cfg      OIDCConfig
	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func (o *oidcClient) ctx(ctx context.Context) context.Context {
	if o.cfg.HTTPClient != nil {
		return oidc.ClientContext(ctx, o.cfg.HTTPClient)
	}
	return ctx
}

// discover returns the OAuth2 config and verifier, discovering once.
func (o *oidcClient) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, nil
	}
	p, err := oidc.NewProvider(o.ctx(ctx), o.cfg.Issuer)
	if err != nil {
		return nil, nil, err
	}
	o.oauth = &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret,
		Endpoint: p.Endpoint(), RedirectURL: o.cfg.RedirectURL, Scopes: o.cfg.Scopes}
	o.verifier = p.VerifierContext(context.WithoutCancel(o.ctx(ctx)), &oidc.Config{ClientID: o.cfg.ClientID, Now: o.cfg.Now})
	return o.oauth, o.verifier, nil
}

// oidcName is the provider's name for the login page's button, "" without OIDC.
func (s *server) oidcName() string {
	if s.oidc == nil {
		return ""
	}
	return s.oidc.cfg.DisplayName
}

func randomHex() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// oidcRefuse shows the login page with a sentence saying why.
func (s *server) oidcRefuse(c *gin.Context, status int, msg string) {
	s.render(c, status, views.LoginPage(views.LoginVM{Error: msg, OIDCName: s.oidcName()}))
}

// oidcStart sends the browser to the provider, remembering state, nonce
// and PKCE verifier in a short-lived cookie bound to this browser.
func (s *server) oidcStart(c *gin.Context) {
	if s.oidc == nil {
		c.Status(http.StatusNotFound)
		return
	}
	conf, _, err := s.oidc.discover(c.Request.Context())
	if err != nil {
		s.log.Error("oidc: discovery failed", "issuer", s.oidc.cfg.Issuer, "err", err)
		s.oidcRefuse(c, http.StatusBadGateway, tr(c, "OIDCUnreachable"))
		return
	}
	state, err1 := randomHex()
	nonce, err2 := randomHex()
	if err := errors.Join(err1, err2); err != nil {
		s.serverError(c, err)
		return
	}
	verifier := oauth2.GenerateVerifier()
	sess, _ := s.sessions.New(c.Request, oidcCookie)
	opts := *sess.Options
	opts.Path, opts.MaxAge = PathOIDCStart, int(oidcFlowTTL.Seconds())
	sess.Options = &opts
	sess.Values = map[any]any{"state": state, "nonce": nonce, "verifier": verifier,
		"next": safeNext(c.Query("next")), "at": time.Now().Unix()}
	if err := sess.Save(c.Request, c.Writer); err != nil {
		s.serverError(c, err)
		return
	}
	c.Redirect(http.StatusFound, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)))
}

// oidcCallback finishes a sign-in: the state must be this browser's, the
// code is exchanged with the PKCE verifier, the ID token verified (issuer,
// audience, expiry, signature) with this browser's nonce, and the engine
// decides who the person is here.
func (s *server) oidcCallback(c *gin.Context) {
	if s.oidc == nil {
		c.Status(http.StatusNotFound)
		return
	}
	sess, _ := s.sessions.Get(c.Request, oidcCookie)
	state, _ := sess.Values["state"].(string)
	nonce, _ := sess.Values["nonce"].(string)
	verifier, _ := sess.Values["verifier"].(string)
	next, _ := sess.Values["next"].(string)
	at, _ := sess.Values["at"].(int64)
	// The cookie serves one attempt only.
	opts := *sess.Options
	opts.Path, opts.MaxAge = PathOIDCStart, -1
	sess.Options = &opts
	sess.Values = map[any]any{}
	_ = sess.Save(c.Request, c.Writer)

	if e := c.Query("error"); e != "" {
		s.log.Warn("oidc: the provider refused", "error", truncateLog(e), "ip", c.ClientIP())
		s.oidcRefuse(c, http.StatusUnauthorized, tr(c, "OIDCNotSignedIn"))
		return
	}
	got := c.Query("state")
	if state == "" || time.Since(time.Unix(at, 0)) > oidcFlowTTL ||
		subtle.ConstantTimeCompare([]byte(got), []byte(state)) != 1 {
		s.log.Warn("oidc: state does not match this browser's sign-in", "ip", c.ClientIP())
		s.oidcRefuse(c, http.StatusBadRequest, tr(c, "OIDCNotStarted"))
		return
	}
	conf, idv, err := s.oidc.discover(c.Request.Context())
	if err != nil {
		s.log.Error("oidc: discovery failed", "issuer", s.oidc.cfg.Issuer, "err", err)
		s.oidcRefuse(c, http.StatusBadGateway, tr(c, "OIDCUnreachable"))
		return
	}
	ctx := s.oidc.ctx(c.Request.Context())
	tok, err := conf.Exchange(ctx, c.Query("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		s.log.Warn("oidc: code exchange failed", "err", err, "ip", c.ClientIP())
		s.oidcRefuse(c, http.StatusUnauthorized, tr(c, "OIDCNotConfirmed"))
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := idv.Verify(ctx, raw)
	if err == nil && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		err = errors.New("the nonce is not this browser's")
	}
	if err != nil {
		s.log.Warn("oidc: ID token refused", "err", err, "ip", c.ClientIP())
		s.oidcRefuse(c, http.StatusUnauthorized, tr(c, "OIDCNotVerified"))
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		s.oidcRefuse(c, http.StatusUnauthorized, tr(c, "OIDCNotRead"))
		return
	}
	id := master.ExternalIdentity{Method: master.MethodOIDC, Subject: idt.Subject,
		Username: claimString(claims, s.oidc.cfg.UsernameClaim), Email: claimString(claims, "email"),
		Groups: claimStrings(claims, s.oidc.cfg.GroupsClaim)}
	u, err := s.m.Accounts().SignInExternal(c.Request.Context(), id)
	if err != nil {
		var me *master.Error
		if !errors.As(err, &me) {
			s.serverError(c, err)
			return
		}
		s.oidcRefuse(c, http.StatusForbidden, tr(c, "OIDCCannot", "Reason", refusal(c, err)))
		return
	}
	if err := s.startSession(c, u); err != nil {
		s.serverError(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, safeNext(next))
}

// claimString is a string claim, "" when absent or of another type.
func claimString(claims map[string]any, name string) string {
	v, _ := claims[name].(string)
	return v
}

// claimStrings is a claim holding a list of strings or one string; other
// items are ignored.
func claimStrings(claims map[string]any, name string) []string {
	switch v := claims[name].(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// truncateLog bounds a provider's text in the log.
func truncateLog(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}
