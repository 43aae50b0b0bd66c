package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Token rules: a name of at most TokenNameMax characters, and an optional
// expiry between a minute and MaxTokenLifetime ahead.
const (
	TokenNameMax     = 64
	MaxTokenLifetime = 5 * 365 * 24 * time.Hour
	minTokenLifetime = time.Minute
	// tokenTouchEvery bounds the writes that record a token's last use.
	tokenTouchEvery = time.Minute
)

// NewToken is an API token to create. ExpiresAt zero means it never expires.
type NewToken struct {
	Name      string
	ExpiresAt time.Time
	// Project is the one project the token acts in. "" is the cluster for
	// a cluster admin's token, the default project for anyone else's.
	Project string
	// Role caps what the token may do there; "" is its owner's role now
	// (which caps it on every request anyway).
	Role ProjectRole
}

// Check returns what is wrong with each field, or nil.
func (t NewToken) Check(now time.Time) protocol.FieldErrors {
	fe := protocol.FieldErrors{}
	switch {
	case strings.TrimSpace(t.Name) == "":
		fe["name"] = "is required"
	case !utf8.ValidString(t.Name) || strings.ContainsRune(t.Name, 0):
		fe["name"] = "must be valid UTF-8 without NUL bytes"
	case utf8.RuneCountInString(t.Name) > TokenNameMax:
		fe["name"] = fmt.Sprintf("is longer than %d characters", TokenNameMax)
	}
	if !t.ExpiresAt.IsZero() {
		switch {
		case t.ExpiresAt.Before(now.Add(minTokenLifetime)):
			fe["expires_at"] = "must be in the future (at least a minute from now)"
		case t.ExpiresAt.After(now.Add(MaxTokenLifetime)):
			fe["expires_at"] = "must be at most 5 years from now"
		}
	}
	if len(fe) == 0 {
		return nil
	}
	return fe
}

// ParseTokenExpiry reads an expiry as the console and the API give it: empty
// (never), RFC 3339, a datetime-local value "2006-01-02T15:04" in UTC, or a
// date, meaning the end of that day in UTC.
func ParseTokenExpiry(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.UTC); err == nil {
		return t.AddDate(0, 0, 1), nil
	}
	return time.Time{}, errors.New("is not a time (use RFC 3339 like 2027-01-31T18:00:00Z, or a date like 2027-01-31)")
}

// Principal is who a request acts as: a user, directly or through one of the
// user's API tokens. Role and state are read at every request, so a token
// never keeps power its owner lost.
type Principal struct {
	Name string
	// Role is the user's cluster role: RoleAdmin, RoleViewer (a viewer of
	// every project, the role from before projects) or RoleNone.
	Role string
	// Memberships are the user's roles in projects, read with the user.
	Memberships map[int64]ProjectRole
	// Token is the name of the API token used, "" for a console session.
	Token string
	// TokenProject is the one project the token acts in (0: the token is
	// not limited to one); TokenRole caps its role there ("": no cap).
	TokenProject int64
	TokenRole    ProjectRole
	// TokenExpiresAt is when the token used expires (zero: never); a token
	// it creates expires no later.
	TokenExpiresAt time.Time
	// Locale is the user's console language ("": follow the browser).
	Locale string
}

// Actor names the principal in the event log: "alice", or "alice (token ci)".
func (p *Principal) Actor() string {
	if p.Token != "" {
		return p.Name + " (token " + p.Token + ")"
	}
	return p.Name
}

// CreateToken stores a new API token owned by owner and returns its plain
// value, which is shown once and never stored. The owner must exist and be
// enabled: a token acts as its owner, and a disabled owner's tokens are
// refused.
//
// People create tokens for themselves; a cluster admin may create one for
// anyone. A token acts in one project with a role no higher than its
// owner's there, or, for a cluster admin, in the cluster.
//
// The rule of tokens made by tokens, stated once here: a child is never
// wider than its maker. It acts in the maker's project (a project-limited
// maker names no other), with at most the maker's role there now (the
// role it gets when none is asked for), and expires no later than the
// maker (when it expires at all; a child with no expiry asked for gets
// the maker's).
func (a *Accounts) CreateToken(ctx context.Context, owner string, in NewToken) (string, *store.APIToken, error) {
	in.Name = strings.TrimSpace(in.Name)
	in.Project = strings.TrimSpace(in.Project)
	asker := PrincipalFrom(ctx)
	byToken := asker != nil && asker.Token != ""
	inherit := byToken && in.Role == ""
	now := time.Now()
	fe := in.Check(now)
	if byToken && !asker.TokenExpiresAt.IsZero() && fe["expires_at"] == "" {
		switch {
		case in.ExpiresAt.IsZero():
			in.ExpiresAt = asker.TokenExpiresAt
		case in.ExpiresAt.After(asker.TokenExpiresAt):
			if fe == nil {
				fe = protocol.FieldErrors{}
			}
			fe["expires_at"] = "must not be later than the expiry of the token that creates it (" + asker.TokenExpiresAt.UTC().Format(time.RFC3339) + ")"
		}
	}
	if in.Role != "" && !in.Role.Valid() {
		if fe == nil {
			fe = protocol.FieldErrors{}
		}
		fe["role"] = fmt.Sprintf("must be one of owner, editor, operator, viewer, not %q", in.Role)
	}
	if fe != nil {
		return "", nil, fe
	}
	if asker != nil && asker.Name != owner && !asker.ClusterAdmin() {
		return "", nil, Errorf(KindForbidden, "forbidden: you may create tokens only for yourself")
	}
	u, err := store.GetUser(ctx, a.db, owner)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, Errorf(KindNotFound, "there is no user %s: a token acts as an existing user", owner)
	}
	if err != nil {
		return "", nil, err
	}
	if u.Disabled {
		return "", nil, Errorf(KindState, "user %s is disabled: its tokens would be refused", owner)
	}
	ownerP, err := a.principalOf(ctx, u)
	if err != nil {
		return "", nil, err
	}
	// A token never gets more than whoever asks has: a token creating
	// tokens is capped by its own scope.
	if byToken && in.Project == "" && asker.TokenProject != 0 {
		p, err := store.GetProjectByID(ctx, a.db, asker.TokenProject)
		if err != nil {
			return "", nil, err
		}
		in.Project = p.Name
	}
	var projectID int64
	if in.Project == "" && u.Role == RoleAdmin && asker != nil && !asker.ClusterAdmin() {
		return "", nil, Errorf(KindForbidden, "forbidden: a token limited to one project cannot create a cluster token; name its project")
	}
	if in.Project != "" || u.Role != RoleAdmin {
		p, err := projectNamed(ctx, a.db, in.Project)
		if err != nil {
			return "", nil, err
		}
		projectID = p.ID
		has := ownerP.RoleIn(p.ID)
		if asker != nil {
			has = minRole(has, asker.RoleIn(p.ID))
		}
		if !has.Valid() {
			return "", nil, Errorf(KindNotFound, "project %s not found", p.Name)
		}
		if in.Role != "" && in.Role.rank() > has.rank() {
			return "", nil, invalidFields(protocol.FieldErrors{"role": fmt.Sprintf("%s's role in project %s is %s: a token may not be given more", u.Username, p.Name, has)})
		}
		if inherit {
			in.Role = has
		}
		ctx = withEventProject(ctx, p.ID)
	} else if in.Role != "" {
		return "", nil, invalidFields(protocol.FieldErrors{"role": "a cluster token has its owner's role; name a project to give it a lower one"})
	}
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		return "", nil, err
	}
	t := &store.APIToken{Name: in.Name, TokenHash: hash, CreatedBy: u.Username, ProjectID: projectID, Role: string(in.Role)}
	if !in.ExpiresAt.IsZero() {
		t.ExpiresAt = in.ExpiresAt.UTC()
	}
	if err := store.CreateToken(ctx, a.db, t); err != nil {
		return "", nil, err
	}
	detail := "owner " + owner + ", never expires"
	if !t.ExpiresAt.IsZero() {
		detail = "owner " + owner + ", expires " + t.ExpiresAt.Format(time.RFC3339)
	}
	a.events.record(ctx, "token.create", "token", tokenTarget(t), nil, detail)
	return plain, t, nil
}

// ListTokens returns the API tokens whoever asks may see, newest first: a
// cluster admin every one, anyone else their own and those of the projects
// they manage.
func (a *Accounts) ListTokens(ctx context.Context) ([]store.APIToken, error) {
	ts, err := store.ListTokens(ctx, a.db)
	p := PrincipalFrom(ctx)
	if err != nil || p == nil || p.ClusterAdmin() {
		return ts, err
	}
	return slices.DeleteFunc(ts, func(t store.APIToken) bool { return !mayManageToken(p, &t) }), nil
}

// mayManageToken reports whether p may see and revoke t: its own, or one of
// a project p manages (a cluster admin: any). A token limited to a project
// sees nothing outside it: not its owner's other tokens, not cluster ones.
func mayManageToken(p *Principal, t *store.APIToken) bool {
	if p == nil || p.ClusterAdmin() {
		return true
	}
	if p.Token != "" && p.TokenProject != 0 && t.ProjectID != p.TokenProject {
		return false
	}
	if t.CreatedBy == p.Name {
		return true
	}
	return t.ProjectID != 0 && p.Can(t.ProjectID, ActManage)
}

// RevokeToken revokes an API token at once and returns it; an unknown token
// is ErrNotFound, one already revoked a state refusal.
func (a *Accounts) RevokeToken(ctx context.Context, id int64) (*store.APIToken, error) {
	t, err := store.GetToken(ctx, a.db, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !mayManageToken(PrincipalFrom(ctx), t)) {
		return nil, Errorf(KindNotFound, "there is no API token %d", id)
	}
	if err != nil {
		return nil, err
	}
	ctx = withEventProject(ctx, t.ProjectID)
	err = store.RevokeToken(ctx, a.db, id)
	if errors.Is(err, store.ErrNotFound) {
		return t, Errorf(KindState, "the token “%s” was already revoked", t.Name)
	}
	if err != nil {
		return nil, err
	}
	t.RevokedAt = time.Now().UTC()
	a.events.record(ctx, "token.revoke", "token", tokenTarget(t), nil, "owner "+t.CreatedBy)
	return t, nil
}

func tokenTarget(t *store.APIToken) string { return strconv.FormatInt(t.ID, 10) + " " + t.Name }

// AuthenticateToken returns who a request with this bearer token acts as now:
// its owner, with the owner's current role. An unknown, revoked or expired
// token, or one whose owner is disabled or gone, is a KindUnauthorized refusal
// whose sentence says which; a database failure is returned as it is.
func (a *Accounts) AuthenticateToken(ctx context.Context, plain string, now time.Time) (*Principal, error) {
	t, err := store.TokenByHash(ctx, a.db, store.HashToken(plain))
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(KindUnauthorized, "this API token is unknown or revoked")
	}
	if err != nil {
		return nil, err
	}
	if !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) {
		return nil, Errorf(KindUnauthorized, "this API token expired at %s; create a new one", t.ExpiresAt.UTC().Format(time.RFC3339))
	}
	u, err := store.GetUser(ctx, a.db, t.CreatedBy)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(KindUnauthorized, "this API token's owner no longer exists")
	}
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, Errorf(KindUnauthorized, "this API token's owner is disabled")
	}
	if now.Sub(t.LastUsedAt) > tokenTouchEvery {
		if err := store.TouchToken(ctx, a.db, t.ID, now); err != nil {
			a.log.Warn("touch token", "token", t.ID, "err", err)
		}
	}
	p, err := a.principalOf(ctx, u)
	if err != nil {
		return nil, err
	}
	p.Token, p.TokenProject, p.TokenRole, p.TokenExpiresAt = t.Name, t.ProjectID, ProjectRole(t.Role), t.ExpiresAt
	return p, nil
}

// principalOf is who u acts as now: its cluster role and its memberships.
func (a *Accounts) principalOf(ctx context.Context, u *store.User) (*Principal, error) {
	ms, err := store.MembershipsOf(ctx, a.db, u.Username)
	if err != nil {
		return nil, err
	}
	p := &Principal{Name: u.Username, Role: u.Role, Locale: u.Locale, Memberships: make(map[int64]ProjectRole, len(ms))}
	for id, r := range ms {
		p.Memberships[id] = ProjectRole(r)
	}
	return p, nil
}
