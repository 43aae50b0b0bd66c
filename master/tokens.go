package master

import (
	"context"
	"errors"
	"fmt"
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
	Role string
	// Token is the name of the API token used, "" for a console session.
	Token string
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
func (a *Accounts) CreateToken(ctx context.Context, owner string, in NewToken) (string, *store.APIToken, error) {
	in.Name = strings.TrimSpace(in.Name)
	if fe := in.Check(time.Now()); fe != nil {
		return "", nil, fe
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
	plain, hash, err := store.NewTokenValue()
	if err != nil {
		return "", nil, err
	}
	t := &store.APIToken{Name: in.Name, TokenHash: hash, CreatedBy: u.Username}
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

// ListTokens returns every API token, newest first.
func (a *Accounts) ListTokens(ctx context.Context) ([]store.APIToken, error) {
	return store.ListTokens(ctx, a.db)
}

// RevokeToken revokes an API token at once and returns it; an unknown token
// is ErrNotFound, one already revoked a state refusal.
func (a *Accounts) RevokeToken(ctx context.Context, id int64) (*store.APIToken, error) {
	t, err := store.GetToken(ctx, a.db, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(KindNotFound, "there is no API token %d", id)
	}
	if err != nil {
		return nil, err
	}
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
	return &Principal{Name: u.Username, Role: u.Role, Token: t.Name}, nil
}
