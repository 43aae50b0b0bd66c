package handlers

import (
	"net/http"
	"time"

	"github.com/schedulemaster-go/schedulemaster/master"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/views"
)

// listTokens shows the API tokens page.
func (s *server) listTokens(c *gin.Context) {
	vm, err := s.tokensVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.Flash = s.takeFlash(c)
	s.render(c, http.StatusOK, views.TokensPage(vm))
}

func (s *server) tokensVM(c *gin.Context) (views.TokensVM, error) {
	ts, err := s.m.Accounts().ListTokens(c.Request.Context())
	if err != nil {
		return views.TokensVM{}, err
	}
	names, err := s.m.Projects().Names(c.Request.Context())
	if err != nil {
		return views.TokensVM{}, err
	}
	vm := views.TokensVM{Layout: s.layout(c, tr(c, "NavTokens"), "tokens"), Roles: projectRoleNames()}
	now := time.Now()
	for _, t := range ts {
		expires := tr(c, "TimeNever")
		if !t.ExpiresAt.IsZero() {
			expires = t.ExpiresAt.UTC().Format("2006-01-02 15:04") + " UTC"
		}
		vm.Tokens = append(vm.Tokens, views.TokenRow{
			ID: t.ID, Name: t.Name, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt.UTC().Format("2006-01-02 15:04"),
			LastUsed: ago(lc(c), t.LastUsedAt, now), Expires: expires, Expired: !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt),
			Revoked: !t.RevokedAt.IsZero(), Project: names[t.ProjectID], Role: t.Role,
		})
	}
	return vm, nil
}

// apiToken is an API token in the open API; the plain value appears only in
// the answer that creates it.
type apiToken struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Revoked    bool       `json:"revoked"`
	Expired    bool       `json:"expired"`
	// Project is the one project the token acts in; "" for a cluster token
	// (and for tokens from before projects, which act as their owner).
	Project string `json:"project"`
	// Role caps the token's role in its project ("": its owner's).
	Role  string `json:"role"`
	Token string `json:"token,omitempty"`
}

func toAPIToken(t *master.APIToken, now time.Time, projects map[int64]string) apiToken {
	opt := func(v time.Time) *time.Time {
		if v.IsZero() {
			return nil
		}
		u := v.UTC()
		return &u
	}
	return apiToken{ID: t.ID, Name: t.Name, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt.UTC(),
		ExpiresAt: opt(t.ExpiresAt), LastUsedAt: opt(t.LastUsedAt), Revoked: !t.RevokedAt.IsZero(),
		Expired: !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt), Project: projects[t.ProjectID], Role: t.Role}
}

// apiListTokens lists every API token (never their values).
func (s *server) apiListTokens(c *gin.Context) {
	ts, err := s.m.Accounts().ListTokens(c.Request.Context())
	if err != nil {
		s.serverError(c, err)
		return
	}
	names, err := s.m.Projects().Names(c.Request.Context())
	if err != nil {
		s.serverError(c, err)
		return
	}
	now := time.Now()
	out := make([]apiToken, 0, len(ts))
	for i := range ts {
		out = append(out, toAPIToken(&ts[i], now, names))
	}
	c.JSON(http.StatusOK, out)
}
