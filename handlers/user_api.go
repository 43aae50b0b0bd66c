package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
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
func toAPIUser(c *gin.Context, u *store.User) apiUser {
	a := apiUser{Username: u.Username, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt.UTC()}
	if p := currentUser(c); p != nil && (p.Role == store.RoleAdmin || p.Name == u.Username) {
		email := u.Email
		a.Email = &email
	}
	return a
}

// apiListUsers answers GET /api/v1/users with every user, by username.
func (s *server) apiListUsers(c *gin.Context) {
	us, err := store.ListUsers(c.Request.Context(), s.st.DB, 0, 0)
	if err != nil {
		s.serverError(c, err)
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
	u, err := store.GetUser(c.Request.Context(), s.st.DB, name)
	if err != nil {
		s.apiError(c, userAPIErr(err, name))
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
		b.Role = store.RoleViewer
	}
	fe := protocol.FieldErrors{}
	userNewErrors(fe, b.Username, b.Role, b.Email, b.Password)
	if len(fe) > 0 {
		s.apiError(c, fe)
		return
	}
	if err := s.userInsert(c, b.Username, b.Role, b.Email, b.Password); err != nil {
		s.apiError(c, userAPIErr(err, b.Username))
		return
	}
	u, err := store.GetUser(c.Request.Context(), s.st.DB, b.Username)
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
	if b.Role == nil && b.Disabled == nil && b.Password == nil && b.Email == nil {
		s.apiError(c, fmt.Errorf("%w: nothing to change: send role, disabled, password or email", master.ErrInvalid))
		return
	}
	fe := protocol.FieldErrors{}
	if b.Role != nil {
		if msg := userCheckRole(*b.Role); msg != "" {
			fe["role"] = msg
		}
	}
	if b.Email != nil {
		*b.Email = strings.TrimSpace(*b.Email)
		if msg := userCheckEmail(*b.Email); msg != "" {
			fe["email"] = msg
		}
	}
	if b.Password != nil {
		if msg := userCheckPassword(*b.Password); msg != "" {
			fe["password"] = msg
		}
	}
	if len(fe) > 0 {
		s.apiError(c, fe)
		return
	}
	if b.Disabled != nil && *b.Disabled && name == currentUser(c).Name {
		err := fmt.Errorf("%w: you cannot disable yourself; ask another admin", master.ErrState)
		s.userEvent(c, "user.update", name, err, userPatchDetail(b))
		s.apiError(c, err)
		return
	}
	var hash string
	if b.Password != nil {
		h, err := userHashPassword(*b.Password)
		if err != nil {
			s.serverError(c, err)
			return
		}
		hash = h
	}
	err := s.st.DB.RunInTx(c.Request.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := store.GetUser(ctx, tx, name); err != nil {
			return err
		}
		if b.Role != nil {
			if err := store.UpdateUserRole(ctx, tx, name, *b.Role); err != nil {
				return err
			}
		}
		if b.Disabled != nil {
			if err := store.SetUserDisabled(ctx, tx, name, *b.Disabled); err != nil {
				return err
			}
		}
		if b.Email != nil {
			if err := store.SetUserEmail(ctx, tx, name, *b.Email); err != nil {
				return err
			}
		}
		if b.Password != nil {
			return store.SetUserPassword(ctx, tx, name, hash)
		}
		return nil
	})
	if err != nil {
		s.log.Warn("user change refused", "username", name, "by", currentUser(c).Name, "err", err)
		if !errors.Is(err, store.ErrNotFound) {
			s.userEvent(c, "user.update", name, userAPIErr(err, name), userPatchDetail(b))
		}
		s.apiError(c, userAPIErr(err, name))
		return
	}
	s.log.Info("user updated", "username", name, "by", currentUser(c).Name, "changes", userPatchDetail(b))
	s.userEvent(c, "user.update", name, nil, userPatchDetail(b))
	u, err := store.GetUser(c.Request.Context(), s.st.DB, name)
	if err != nil {
		s.serverError(c, err)
		return
	}
	c.JSON(http.StatusOK, toAPIUser(c, u))
}

// userPatchDetail says what a PATCH changes, without the password itself.
func userPatchDetail(b apiPatchUserBody) string {
	var parts []string
	if b.Role != nil {
		parts = append(parts, "role "+*b.Role)
	}
	if b.Disabled != nil {
		parts = append(parts, fmt.Sprintf("disabled %t", *b.Disabled))
	}
	if b.Email != nil {
		if *b.Email == "" {
			parts = append(parts, "email none")
		} else {
			parts = append(parts, "email "+*b.Email)
		}
	}
	if b.Password != nil {
		parts = append(parts, "new password")
	}
	return strings.Join(parts, ", ")
}
