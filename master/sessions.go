package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// SessionTTL is how long a console login lasts without logging in again.
const SessionTTL = 7 * 24 * time.Hour

// SessionKeys returns the cookie hash and block keys, kept in the database so
// that a restart, or a second master, keeps users logged in.
func (a *Accounts) SessionKeys(ctx context.Context) (hashKey, blockKey []byte, err error) {
	gen := func() (string, error) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return hex.EncodeToString(b), nil
	}
	var keys [][]byte
	for _, name := range []string{"session_hash_key", "session_block_key"} {
		v, err := store.EnsureSetting(ctx, a.db, name, gen)
		if err != nil {
			return nil, nil, fmt.Errorf("master: session keys: %w", err)
		}
		k, err := hex.DecodeString(v)
		if err != nil || len(k) != 32 {
			return nil, nil, fmt.Errorf("master: stored %s is not 32 hex bytes", name)
		}
		keys = append(keys, k)
	}
	return keys[0], keys[1], nil
}

// StartSession makes a new console session for username and returns the
// token its cookie keeps. The session the request had, if any (old, its
// token), ends, so a planted cookie never becomes a logged-in one; expired
// sessions are pruned (logins are rare, so it costs nothing).
func (a *Accounts) StartSession(ctx context.Context, username, old string) (string, error) {
	if old != "" {
		if err := store.DeleteSession(ctx, a.db, store.HashSessionToken(old)); err != nil {
			return "", err
		}
	}
	now := time.Now()
	if _, err := store.PruneSessions(ctx, a.db, now); err != nil {
		a.log.Warn("prune sessions", "err", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("master: session token: %w", err)
	}
	tok := hex.EncodeToString(b)
	if err := store.CreateSession(ctx, a.db, &store.Session{ID: store.HashSessionToken(tok), Username: username,
		CreatedAt: now, ExpiresAt: now.Add(SessionTTL)}); err != nil {
		return "", err
	}
	return tok, nil
}

// EndSession ends the session of a cookie token (logout).
func (a *Accounts) EndSession(ctx context.Context, token string) error {
	return store.DeleteSession(ctx, a.db, store.HashSessionToken(token))
}

// AuthenticateSession returns who a console session acts as now, nil when
// the token names no live session or its user is disabled or gone. The
// server's row is the authority: logout, disable, password and role changes
// delete it, so a replayed cookie is worthless. A database failure is
// returned as it is.
func (a *Accounts) AuthenticateSession(ctx context.Context, token string, now time.Time) (*Principal, error) {
	row, err := store.GetSession(ctx, a.db, store.HashSessionToken(token), now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u, err := store.GetUser(ctx, a.db, row.Username)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, nil
	}
	return a.principalOf(ctx, u)
}
