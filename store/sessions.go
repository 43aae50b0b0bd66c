package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Session is a console login kept on the server, so that logout, disabling a
// user and password or role changes end it at once. The cookie holds a random
// token; the row holds only its SHA-256, so a database leak gives no cookie.
type Session struct {
	bun.BaseModel `bun:"table:sessions"`

	ID        string    `bun:"id,pk"` // hex SHA-256 of the cookie's token
	Username  string    `bun:"username"`
	CreatedAt time.Time `bun:"created_at"`
	ExpiresAt time.Time `bun:"expires_at"`
}

// HashSessionToken is the session id stored for a cookie token.
func HashSessionToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateSession stores a session.
func CreateSession(ctx context.Context, db bun.IDB, s *Session) error {
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now().UTC()
	}
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	if _, err := db.NewInsert().Model(s).Exec(ctx); err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	return nil
}

// GetSession returns the unexpired session with that id, or ErrNotFound.
func GetSession(ctx context.Context, db bun.IDB, id string, now time.Time) (*Session, error) {
	s := new(Session)
	err := db.NewSelect().Model(s).Where("id = ?", id).Where("expires_at > ?", now.UTC()).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: get session: %w", notFound(err))
	}
	return s, nil
}

// DeleteSession removes one session; a missing one is not an error.
func DeleteSession(ctx context.Context, db bun.IDB, id string) error {
	if _, err := db.NewDelete().Model((*Session)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

// DeleteUserSessions removes every session of a user.
func DeleteUserSessions(ctx context.Context, db bun.IDB, username string) error {
	if _, err := db.NewDelete().Model((*Session)(nil)).Where("username = ?", username).Exec(ctx); err != nil {
		return fmt.Errorf("store: delete sessions of %q: %w", username, err)
	}
	return nil
}

// PruneSessions removes expired sessions and returns how many.
func PruneSessions(ctx context.Context, db bun.IDB, now time.Time) (int64, error) {
	res, err := db.NewDelete().Model((*Session)(nil)).Where("expires_at <= ?", now.UTC()).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: prune sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
