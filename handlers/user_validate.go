package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"regexp"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/master"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Password rules: at least userPasswordMin characters; bcrypt reads at most
// 72 bytes, so a longer password is refused rather than silently cut.
const (
	userPasswordMin      = 10
	userPasswordMaxBytes = 72
	userPageSize         = 50
)

var userNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// userCheckUsername returns what is wrong with a new username, or "".
func userCheckUsername(name string) string {
	switch {
	case name == "":
		return "is required"
	case len(name) > 64:
		return "is longer than 64 characters"
	case !userNameRE.MatchString(name):
		return "may only contain letters, digits, dot, underscore and hyphen"
	case name == "." || name == "..":
		return "cannot be . or .."
	}
	return ""
}

// userCheckRole returns what is wrong with a role, or "".
func userCheckRole(role string) string {
	if !store.ValidRole(role) {
		return fmt.Sprintf("must be admin or viewer, not %q", role)
	}
	return ""
}

// userCheckEmail returns what is wrong with an optional email address, or "".
func userCheckEmail(email string) string {
	if email == "" {
		return ""
	}
	if len(email) > 254 {
		return "is longer than 254 characters"
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Name != "" || a.Address != email {
		return "is not a valid email address (like ops@example.com)"
	}
	return ""
}

// userCheckPassword returns what is wrong with a new password, or "".
func userCheckPassword(pw string) string {
	switch {
	case pw == "":
		return "is required"
	case utf8.RuneCountInString(pw) < userPasswordMin:
		return fmt.Sprintf("must be at least %d characters", userPasswordMin)
	case len(pw) > userPasswordMaxBytes:
		return fmt.Sprintf("must be at most %d bytes", userPasswordMaxBytes)
	}
	return ""
}

// userHashPassword is the stored form of a password.
func userHashPassword(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// userChangeError maps the store's answer to a change of user name into a
// status and a message for a person; status 0 means unexpected.
func userChangeError(err error, name string) (int, string) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "There is no user " + name + "."
	case errors.Is(err, store.ErrLastAdmin):
		return http.StatusConflict, name + " is the only enabled admin: make another user admin first, so that someone can still change things."
	case errors.Is(err, store.ErrDuplicate):
		return http.StatusConflict, "User " + name + " already exists."
	}
	return 0, ""
}

// userAPIErr wraps a store error in the engine's sentinels, so apiError
// answers it with the right status and a readable message.
func userAPIErr(err error, name string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: no user %s", master.ErrNotFound, name)
	case errors.Is(err, store.ErrLastAdmin):
		return fmt.Errorf("%w: %s is the only enabled admin; make another user admin first", master.ErrState, name)
	case errors.Is(err, store.ErrDuplicate):
		return fmt.Errorf("%w: user %s already exists", master.ErrDuplicate, name)
	}
	return err
}

// userSelfDisableMsg refuses disabling oneself.
const userSelfDisableMsg = "You cannot disable yourself; ask another admin."

// userEvent records a user action in the event log (the actor comes from the
// request's context); err is the refusal, if any. Never pass a password.
func (s *server) userEvent(c *gin.Context, action, username string, err error, detail string) {
	s.m.RecordEvent(c.Request.Context(), action, store.TargetUser, username, err, detail)
}
