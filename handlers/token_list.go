package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/store"
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
	ts, err := store.ListTokens(c.Request.Context(), s.st.DB)
	if err != nil {
		return views.TokensVM{}, err
	}
	vm := views.TokensVM{Layout: s.layout(c, "API tokens", "tokens")}
	now := time.Now()
	for _, t := range ts {
		vm.Tokens = append(vm.Tokens, views.TokenRow{
			ID: t.ID, Name: t.Name, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt.UTC().Format("2006-01-02 15:04"),
			LastUsed: ago(t.LastUsedAt, now), Revoked: !t.RevokedAt.IsZero(),
		})
	}
	return vm, nil
}
