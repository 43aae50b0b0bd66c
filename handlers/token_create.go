package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// createToken makes an API token and shows it once.
func (s *server) createToken(c *gin.Context) {
	name := strings.TrimSpace(c.PostForm("name"))
	var msg string
	switch {
	case name == "":
		msg = "Name is required."
	case len(name) > 64:
		msg = "Name is longer than 64 characters."
	}
	if msg != "" {
		vm, err := s.tokensVM(c)
		if err != nil {
			s.serverError(c, err)
			return
		}
		vm.Error, vm.Name = msg, name
		s.render(c, http.StatusUnprocessableEntity, views.TokensPage(vm))
		return
	}
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		s.serverError(c, err)
		return
	}
	if err := store.CreateToken(c.Request.Context(), s.st.DB, &store.APIToken{Name: name, TokenHash: hash, CreatedBy: currentUser(c).Name}); err != nil {
		s.serverError(c, err)
		return
	}
	s.log.Info("api token created", "name", name, "user", currentUser(c).Name)
	vm, err := s.tokensVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.NewToken = plain
	vm.Flash = &views.Flash{OK: true, Message: "Token " + name + " created."}
	c.Header("Cache-Control", "no-store")
	s.render(c, http.StatusOK, views.TokensPage(vm))
}
