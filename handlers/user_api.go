package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// apiUser is a user in the open API; the password hash is never shown.
type apiUser struct {
	Username string `json:"username"`
	Role     string `json:"role"`
	// Email is left out for viewers, except on their own user.
	Email     *string   `json:"email,omitempty"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

// toAPIUser shows a user to the caller: e-mails only to admins and to the
// user themself.
func toAPIUser(c *gin.Context, u *master.User) apiUser {
	a := apiUser{Username: u.Username, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt.UTC()}
	if p := currentUser(c); p != nil && (p.ClusterAdmin() || p.Name == u.Username) {
		email := u.Email
		a.Email = &email
	}
	return a
}

// apiListUsers answers GET /api/v1/users with every user, by username.
func (s *server) apiListUsers(c *gin.Context) {
	us, _, err := s.m.Accounts().ListUsers(c.Request.Context(), 0, 0)
	if err != nil {
		s.apiError(c, err)
		return
	}
	out := make([]apiUser, len(us))
	for i := range us {
		out[i] = toAPIUser(c, &us[i])
	}
	c.JSON(http.StatusOK, out)
}

// apiGetUser answers GET /api/v1/users/{username}.
func (s *server) apiGetUser(c *gin.Context) {
	name := c.Param("username")
	u, err := s.m.Accounts().GetUser(c.Request.Context(), name)
	if err != nil {
		s.apiError(c, err)
		return
	}
	c.JSON(http.StatusOK, toAPIUser(c, u))
}

// apiCreateUserBody is the body of POST /api/v1/users; role defaults to viewer.
type apiCreateUserBody struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Role     string `json:"role"`
	Email    string `json:"email"`
}

// apiCreateUser answers POST /api/v1/users with 201 and the new user.
func (s *server) apiCreateUser(c *gin.Context) {
	var b apiCreateUserBody
	if !bindJSON(c, &b) {
		return
	}
	b.Username, b.Email = strings.TrimSpace(b.Username), strings.TrimSpace(b.Email)
	if b.Role == "" {
		b.Role = master.RoleViewer
	}
	if msg := emailDomainProblem(b.Email); msg != "" {
		s.apiError(c, protocol.FieldErrors{"email": msg})
		return
	}
	if err := s.m.Accounts().CreateUser(c.Request.Context(), master.NewUser{Username: b.Username, Role: b.Role, Email: b.Email, Password: b.Password}); err != nil {
		s.apiError(c, err)
		return
	}
	u, err := s.m.Accounts().GetUser(c.Request.Context(), b.Username)
	if err != nil {
		s.serverError(c, err)
		return
	}
	c.JSON(http.StatusCreated, toAPIUser(c, u))
}

// apiPatchUserBody is the body of PATCH /api/v1/users/{username}: the fields
// to change, at least one.
type apiPatchUserBody struct {
	Role     *string `json:"role"`
	Disabled *bool   `json:"disabled"`
	Password *string `json:"password"`
	Email    *string `json:"email"`
}

// apiPatchUser answers PATCH /api/v1/users/{username}: all the changes are
// made together or none is.
func (s *server) apiPatchUser(c *gin.Context) {
	name := c.Param("username")
	var b apiPatchUserBody
	if !bindJSON(c, &b) {
		return
	}
	if b.Email != nil {
		if msg := emailDomainProblem(strings.TrimSpace(*b.Email)); msg != "" {
			s.apiError(c, protocol.FieldErrors{"email": msg})
			return
		}
	}
	if err := s.m.Accounts().PatchUser(c.Request.Context(), name, master.UserPatch(b)); err != nil {
		s.apiError(c, err)
		return
	}
	u, err := s.m.Accounts().GetUser(c.Request.Context(), name)
	if err != nil {
		s.serverError(c, err)
		return
	}
	c.JSON(http.StatusOK, toAPIUser(c, u))
}
