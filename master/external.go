package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// ExternalIdentity is a person an identity provider vouches for (OIDC
// today): the provider has checked who they are, the engine decides what
// they may do.
type ExternalIdentity struct {
	Method   string // "oidc"
	Subject  string // the provider's stable id of the person
	Username string // the name the user gets here, from a configured claim
	Email    string
	Groups   []string
}

// GroupRoles maps an identity provider's groups to today's roles: a member
// of AdminGroup is admin, else a member of any of ViewerGroups is viewer,
// else the person is refused.
type GroupRoles struct {
	AdminGroup   string
	ViewerGroups []string
}

// Role returns the role for groups, or "" when none is mapped.
func (g GroupRoles) Role(groups []string) string {
	if g.AdminGroup != "" && slices.Contains(groups, g.AdminGroup) {
		return store.RoleAdmin
	}
	for _, v := range g.ViewerGroups {
		if v != "" && slices.Contains(groups, v) {
			return store.RoleViewer
		}
	}
	return ""
}

// SignInExternal signs in a person an identity provider vouched for. The
// role comes from their groups by roles on every sign-in (no mapped group:
// refused with a sentence); the user is created on first sign-in, without a
// local password. A local user of the same name, or one created by another
// method, is never taken over. It records user.login (or its refusal) with
// the method, and returns the user the session is for.
func (a *Accounts) SignInExternal(ctx context.Context, id ExternalIdentity, roles GroupRoles) (*store.User, error) {
	detail := "method " + id.Method
	ctx = WithActor(ctx, id.Username)
	refuse := func(err error) (*store.User, error) {
		a.log.Warn("external sign-in refused", "method", id.Method, "username", id.Username, "err", err)
		a.events.record(ctx, "user.login", store.TargetUser, id.Username, err, detail)
		return nil, err
	}
	if id.Method == "" || id.Subject == "" || len(id.Subject) > 255 || !utf8.ValidString(id.Subject) {
		return refuse(Errorf(KindInvalid, "the identity provider sent no usable subject"))
	}
	if msg := CheckUsername(id.Username); msg != "" {
		ctx = WithActor(ctx, "system")
		return refuse(Errorf(KindInvalid, "the username the identity provider sent (%q) %s", truncate(id.Username, 64), msg))
	}
	email := strings.TrimSpace(id.Email)
	if CheckEmail(email) != "" {
		email = "" // an address we cannot mail is not a reason to refuse the person
	}
	role := roles.Role(id.Groups)
	if role == "" {
		return refuse(Errorf(KindForbidden, "%s is in none of the groups allowed to use ScheduleMaster; ask an administrator to add you to one", id.Username))
	}
	u, err := store.GetUser(ctx, a.db, id.Username)
	switch {
	case errors.Is(err, store.ErrNotFound):
		row := &store.User{Username: id.Username, Role: role, Email: email, AuthMethod: id.Method, ExternalSubject: id.Subject}
		if err := store.CreateUser(ctx, a.db, row); err != nil {
			if errors.Is(err, store.ErrDuplicate) {
				return refuse(Errorf(KindDuplicate, "user %s was created at the same moment; sign in again", id.Username))
			}
			return nil, err
		}
		a.log.Info("user created on first sign-in", "method", id.Method, "username", id.Username, "role", role)
		a.events.record(ctx, "user.create", store.TargetUser, id.Username, nil, "role "+role+", "+detail)
		u = row
	case err != nil:
		return nil, err
	case u.AuthMethod != id.Method:
		return refuse(Errorf(KindDuplicate, "a user named %s already exists and does not sign in with %s; an administrator must rename one of them", id.Username, id.Method))
	case u.ExternalSubject != "" && u.ExternalSubject != id.Subject:
		return refuse(Errorf(KindDuplicate, "user %s belongs to another person of the identity provider", id.Username))
	case u.Disabled:
		return refuse(Errorf(KindForbidden, "user %s is disabled", id.Username))
	default:
		if u.Role != role {
			if err := store.UpdateUserRole(ctx, a.db, u.Username, role); err != nil {
				if errors.Is(err, store.ErrLastAdmin) {
					return refuse(Errorf(KindState, "%s is the only enabled admin and is no longer in the admin group; make another user admin first", id.Username))
				}
				return nil, fmt.Errorf("master: user %s: %w", id.Username, err)
			}
			a.events.record(ctx, "user.update", store.TargetUser, id.Username, nil, "role "+role+", from the groups of "+id.Method)
			u.Role = role
		}
		if u.Email != email || u.ExternalSubject != id.Subject {
			if err := store.SetUserExternal(ctx, a.db, u.Username, email, id.Subject); err != nil {
				return nil, fmt.Errorf("master: user %s: %w", id.Username, err)
			}
			u.Email, u.ExternalSubject = email, id.Subject
		}
	}
	a.log.Info("login", "method", id.Method, "username", id.Username, "role", role)
	a.events.record(ctx, "user.login", store.TargetUser, id.Username, nil, detail)
	return u, nil
}

// truncate cuts s to at most n bytes for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
