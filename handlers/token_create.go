package handlers

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/views"
)

// createToken makes an API token and shows it once.
func (s *server) createToken(c *gin.Context) {
	name := strings.TrimSpace(c.PostForm("name"))
	expiresRaw := strings.TrimSpace(c.PostForm("expires_at"))
	in := master.NewToken{Name: name, Project: strings.TrimSpace(c.PostForm("project")), Role: master.ProjectRole(strings.TrimSpace(c.PostForm("role")))}
	if in.Project == "*cluster*" {
		in.Project = ""
	}
	fe := protocol.FieldErrors{}
	if exp, err := master.ParseTokenExpiry(expiresRaw); err != nil {
		fe["expires_at"] = err.Error()
	} else {
		in.ExpiresAt = exp
	}
	var plain string
	status := http.StatusUnprocessableEntity
	if len(fe) == 0 {
		var err error
		plain, _, err = s.m.Accounts().CreateToken(c.Request.Context(), currentUser(c).Name, in)
		if err != nil && !errors.As(err, &fe) {
			if errorStatus(err) == 0 {
				s.serverError(c, err)
				return
			}
			fe, status = protocol.FieldErrors{"name": refusal(c, err)}, errorStatus(err)
		}
	}
	if len(fe) > 0 {
		vm, err := s.tokensVM(c)
		if err != nil {
			s.serverError(c, err)
			return
		}
		if msg := fe["name"]; msg != "" {
			vm.Error = tr(c, "FieldSentence", "Field", tr(c, "ColName"), "Msg", views.Refusal(c.Request.Context(), msg))
		}
		for _, f := range []string{"role", "project"} {
			if msg := fe[f]; msg != "" {
				vm.Error = views.Refusal(c.Request.Context(), msg)
			}
		}
		if msg := fe["expires_at"]; msg != "" {
			vm.ExpiresError = msg
		}
		vm.Name, vm.ExpiresAt = name, expiresRaw
		s.render(c, status, views.TokensPage(vm))
		return
	}
	s.log.Info("api token created", "name", name, "user", currentUser(c).Name)
	vm, err := s.tokensVM(c)
	if err != nil {
		s.serverError(c, err)
		return
	}
	vm.NewToken = plain
	vm.Flash = &views.Flash{OK: true, Message: tr(c, "FlashTokenCreated", "Name", name)}
	s.render(c, http.StatusOK, views.TokensPage(vm))
}

// tokenCreateBody is POST /api/v1/tokens.
type tokenCreateBody struct {
	Name      string  `json:"name"`
	ExpiresAt *string `json:"expires_at"`
	// Project is the one project the token acts in; absent: the cluster
	// for a cluster admin, the default project for anyone else.
	Project string `json:"project,omitempty"`
	// Role caps its role there; absent: its owner's role.
	Role string `json:"role,omitempty"`
}

// apiCreateToken makes an API token owned by the caller; the answer is the
// only place its value appears.
func (s *server) apiCreateToken(c *gin.Context) {
	var b tokenCreateBody
	if !bindJSON(c, &b) {
		return
	}
	in := master.NewToken{Name: b.Name, Project: b.Project, Role: master.ProjectRole(b.Role)}
	if b.ExpiresAt != nil {
		exp, err := master.ParseTokenExpiry(*b.ExpiresAt)
		if err != nil {
			s.apiError(c, protocol.FieldErrors{"expires_at": err.Error()})
			return
		}
		in.ExpiresAt = exp
	}
	plain, t, err := s.m.Accounts().CreateToken(c.Request.Context(), currentUser(c).Name, in)
	if err != nil {
		s.apiError(c, err)
		return
	}
	names, _ := s.m.Projects().Names(c.Request.Context())
	out := toAPIToken(t, time.Now(), names)
	out.Token = plain
	c.JSON(http.StatusCreated, out)
}
