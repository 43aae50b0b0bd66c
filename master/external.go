package master

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// MethodLDAP is the sign-in method of users from an LDAP directory.
const MethodLDAP = "ldap"

// MethodOIDC is the sign-in method of users from an OpenID Connect provider.
const MethodOIDC = "oidc"

// ExternalIdentity is a person an identity provider (an LDAP directory, later
// OIDC) vouches for: Method names the provider, Subject is its stable id (an
// LDAP DN), Groups the provider's groups, mapped to a role by GroupRoles.
type ExternalIdentity struct {
	Method, Subject, Username, Email string
	Groups                           []string
}

// GroupRoles maps a provider's groups to a cluster role: a member of any
// Admin group is admin, else of any Viewer group viewer, else nothing.
// Groups compare case-insensitively (LDAP DNs do).
type GroupRoles struct {
	Admin, Viewer []string
	// Projects map groups to roles in projects. When set, an external
	// user's memberships are exactly what its groups grant, set at every
	// sign-in.
	Projects []GroupProject
}

// GroupProject grants the members of Group the Role in Project.
type GroupProject struct {
	Group, Project string
	Role           ProjectRole
}

// ParseGroupProjects reads a project group mapping: items separated by
// ";", each GROUP=>PROJECT:ROLE (=> because LDAP DNs hold = and ,), e.g.
// "cn=billing,ou=groups,dc=example,dc=com=>billing:editor".
func ParseGroupProjects(s string) ([]GroupProject, error) {
	var out []GroupProject
	for _, item := range strings.Split(s, ";") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		group, grant, ok := strings.Cut(item, "=>")
		project, role, ok2 := strings.Cut(grant, ":")
		group, project, role = strings.TrimSpace(group), strings.TrimSpace(project), strings.TrimSpace(role)
		switch {
		case !ok || !ok2 || group == "":
			return nil, fmt.Errorf("%q is not GROUP=>PROJECT:ROLE", item)
		case CheckProjectName(project) != "":
			return nil, fmt.Errorf("%q: project name %q %s", item, project, CheckProjectName(project))
		case !ProjectRole(role).Valid():
			return nil, fmt.Errorf("%q: role %q is not owner, editor, operator or viewer", item, role)
		}
		out = append(out, GroupProject{Group: group, Project: project, Role: ProjectRole(role)})
	}
	return out, nil
}

// Grants returns the project roles groups grant: project name -> the most
// powerful role any of the groups gives.
func (g GroupRoles) Grants(groups []string) map[string]ProjectRole {
	out := map[string]ProjectRole{}
	for _, gp := range g.Projects {
		for _, have := range groups {
			if strings.EqualFold(strings.TrimSpace(gp.Group), strings.TrimSpace(have)) {
				out[gp.Project] = maxRole(out[gp.Project], gp.Role)
			}
		}
	}
	return out
}

// Role is the role groups grant, or "" for none.
func (g GroupRoles) Role(groups []string) string {
	in := func(list []string) bool {
		for _, want := range list {
			for _, have := range groups {
				if strings.EqualFold(strings.TrimSpace(want), strings.TrimSpace(have)) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case in(g.Admin):
		return store.RoleAdmin
	case in(g.Viewer):
		return store.RoleViewer
	}
	return ""
}

// PasswordDirectory checks a user name and password against an external
// directory (LDAP). Authenticate returns ErrDirectoryRefused for an unknown
// user or a wrong password (one answer for both) and ErrDirectoryUnavailable,
// wrapped, when the directory cannot answer.
type PasswordDirectory interface {
	Method() string
	Roles() GroupRoles
	Authenticate(ctx context.Context, username, password string) (*ExternalIdentity, error)
}

// externalRoles returns the group mapping of method, if one is configured.
func (a *Accounts) externalRoles(method string) (GroupRoles, bool) {
	if a.directory != nil && a.directory.Method() == method {
		return a.directory.Roles(), true
	}
	if method == MethodOIDC && a.oidcRoles != nil {
		return *a.oidcRoles, true
	}
	return GroupRoles{}, false
}

// SignInExternal signs in a person an identity provider vouched for: it
// creates the user just in time (local name rules apply), sets the role the
// groups map to on every sign-in, and records user.login with the method. A
// local user of the same name (or one of another method) is refused, so a
// directory entry never takes over a local account; so is a person in no
// mapped group (KindForbidden, with a sentence).
func (a *Accounts) SignInExternal(ctx context.Context, id ExternalIdentity) (*store.User, error) {
	refuse := func(err error) (*store.User, error) {
		a.log.Warn("external sign-in refused", "method", id.Method, "username", id.Username, "err", Message(err))
		a.events.record(ctx, "user.login", store.TargetUser, id.Username, err, "method "+id.Method)
		return nil, err
	}
	mapping, ok := a.externalRoles(id.Method)
	if !ok {
		return nil, Errorf(KindInvalid, "sign-in method %q is not configured", id.Method)
	}
	if msg := CheckUsername(id.Username); msg != "" {
		return refuse(Errorf(KindForbidden, "the %s user name %q cannot be a ScheduleMaster user name: it %s", id.Method, id.Username, msg))
	}
	role := mapping.Role(id.Groups)
	grants := mapping.Grants(id.Groups)
	if role == "" && len(grants) == 0 {
		return refuse(Errorf(KindForbidden, "%s is in no %s group that grants a ScheduleMaster role (admin, viewer or a project role); ask your directory's administrator", id.Username, id.Method))
	}
	if role == "" {
		role = RoleNone
	}
	email := strings.TrimSpace(id.Email)
	if CheckEmail(email) != "" {
		email = "" // the directory's address is a convenience, not a reason to refuse
	}
	u, err := store.GetUser(ctx, a.db, id.Username)
	switch {
	case errors.Is(err, store.ErrNotFound):
		row := &store.User{Username: id.Username, Role: role, Email: email, AuthMethod: id.Method}
		if id.Method == MethodOIDC {
			row.ExternalSubject = id.Subject // the name stays this person's
		}
		if err := store.CreateUser(ctx, a.db, row); err != nil {
			if errors.Is(err, store.ErrDuplicate) && !externalRetry(ctx) {
				// Created meanwhile (another sign-in, or an admin): decide
				// again, once; names compare case-folded in the lookup and
				// the unique index alike, so the second look finds it.
				return a.SignInExternal(context.WithValue(ctx, externalRetryKey{}, true), id)
			}
			if errors.Is(err, store.ErrDuplicate) {
				return refuse(Errorf(KindForbidden, "a user named %s (compared without case) already exists and could not be matched to this %s account; an admin can rename or delete it", id.Username, id.Method))
			}
			return nil, err
		}
		a.log.Info("user created", "username", id.Username, "role", role, "by", id.Method)
		a.events.record(ctx, "user.create", store.TargetUser, id.Username, nil, fmt.Sprintf("role %s, by %s sign-in", role, id.Method))
		u = row
	case err != nil:
		return nil, err
	case u.AuthMethod != id.Method:
		return refuse(Errorf(KindForbidden, "a local user named %s already exists (names compare without case), so the %s account %s cannot sign in; an admin can rename or delete the local user", u.Username, id.Method, id.Username))
	case id.Method == MethodOIDC && u.ExternalSubject != "" && u.ExternalSubject != id.Subject:
		// The provider gave this name to another person: never take over the first one's account.
		return refuse(Errorf(KindForbidden, "user %s belongs to another person of the %s provider; an admin can rename or delete it", id.Username, id.Method))
	case u.Disabled:
		return refuse(Errorf(KindUnauthorized, "wrong username or password"))
	default:
		if u.Role != role {
			if err := store.UpdateUserRole(ctx, a.db, u.Username, role); err != nil {
				return refuse(userRefusal(err, u.Username))
			}
			a.events.record(ctx, "user.update", store.TargetUser, u.Username, nil, fmt.Sprintf("role %s, from %s groups", role, id.Method))
			u.Role = role
		}
		if email != "" && u.Email != email {
			if err := store.SetUserEmail(ctx, a.db, u.Username, email); err != nil {
				return nil, err
			}
			u.Email = email
		}
	}
	if len(mapping.Projects) > 0 {
		if err := a.setGrantedMemberships(ctx, u.Username, id.Method, grants); err != nil {
			return nil, err
		}
	}
	a.log.Info("external sign-in", "method", id.Method, "username", u.Username, "role", u.Role, "projects", len(grants))
	a.events.record(WithActor(ctx, u.Username), "user.login", store.TargetUser, u.Username, nil, "method "+id.Method)
	return u, nil
}

// setGrantedMemberships makes a user's memberships exactly what its groups
// grant now; a mapped project that does not exist is skipped (and logged).
func (a *Accounts) setGrantedMemberships(ctx context.Context, username, method string, grants map[string]ProjectRole) error {
	ids := map[int64]string{}
	for name, role := range grants {
		p, err := store.GetProject(ctx, a.db, name)
		if errors.Is(err, store.ErrNotFound) {
			a.log.Warn("group mapping names a project that does not exist", "project", name, "method", method)
			continue
		}
		if err != nil {
			return err
		}
		ids[p.ID] = string(role)
	}
	return store.ReplaceMemberships(ctx, a.db, username, method, ids)
}

// loginDirectory checks a password against the configured directory under
// the ticket already reserved: a wrong password keeps the reservation, a
// directory that cannot answer gives it back (no password was checked) and is
// KindUnavailable with ErrDirectoryUnavailable, so nobody reads it as a
// wrong password.
func (a *Accounts) loginDirectory(ctx context.Context, t *loginTicket, now time.Time, username, password string) (*store.User, error) {
	id, err := a.directory.Authenticate(ctx, username, password)
	switch {
	case errors.Is(err, ErrDirectoryRefused):
		a.logins.failed(ctx, now)
		return nil, Errorf(KindUnauthorized, "wrong username or password")
	case err != nil:
		a.logins.succeeded(ctx, t, now)
		a.log.Error("login: the directory cannot answer", "method", a.directory.Method(), "err", err)
		return nil, &Error{Kind: KindUnavailable, Err: errors.Join(ErrDirectoryUnavailable, err),
			Msg: fmt.Sprintf("the %s directory cannot be reached; try again in a minute (local accounts still work)", strings.ToUpper(a.directory.Method()))}
	}
	// The password was right: whatever the mapping says, it costs no attempt.
	a.logins.succeeded(ctx, t, now)
	return a.SignInExternal(ctx, *id)
}

type externalRetryKey struct{}

// externalRetry reports whether this sign-in is already the one retry.
func externalRetry(ctx context.Context) bool { v, _ := ctx.Value(externalRetryKey{}).(bool); return v }
