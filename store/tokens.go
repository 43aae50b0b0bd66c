package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// APIToken is a bearer token for the open API; only its SHA-256 is stored.
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`

	ID         int64     `bun:"id,pk,autoincrement"`
	Name       string    `bun:"name"`
	TokenHash  string    `bun:"token_hash"`
	CreatedBy  string    `bun:"created_by"`
	CreatedAt  time.Time `bun:"created_at"`
	LastUsedAt time.Time `bun:"last_used_at,nullzero"`
	RevokedAt  time.Time `bun:"revoked_at,nullzero"`
	// ExpiresAt is when the token stops working; zero: never.
	ExpiresAt time.Time `bun:"expires_at,nullzero"`
	// ProjectID is the one project the token acts in; 0 (NULL): the
	// cluster (a cluster admin's token) or, for tokens from before projects,
	// wherever its owner may act.
	ProjectID int64 `bun:"project_id,nullzero"`
	// Role caps what the token may do in its project ("" : its owner's
	// role); the owner's current role always caps it too.
	Role string `bun:"role"`
}

// CreateToken inserts t.
func CreateToken(ctx context.Context, db bun.IDB, t *APIToken) error {
	t.CreatedAt = time.Now().UTC()
	if _, err := db.NewInsert().Model(t).Exec(ctx); err != nil {
		return fmt.Errorf("store: create token: %w", err)
	}
	return nil
}

// TokenByHash returns the unrevoked token with that hash or ErrNotFound.
func TokenByHash(ctx context.Context, db bun.IDB, hash string) (*APIToken, error) {
	t := new(APIToken)
	err := db.NewSelect().Model(t).Where("token_hash = ?", hash).Where("revoked_at IS NULL").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: token: %w", notFound(err))
	}
	return t, nil
}

// GetToken returns a token by id, revoked or not, or ErrNotFound.
func GetToken(ctx context.Context, db bun.IDB, id int64) (*APIToken, error) {
	t := new(APIToken)
	if err := db.NewSelect().Model(t).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: token %d: %w", id, notFound(err))
	}
	return t, nil
}

// TouchToken records that a token was used.
func TouchToken(ctx context.Context, db bun.IDB, id int64, at time.Time) error {
	_, err := db.NewUpdate().Model((*APIToken)(nil)).Set("last_used_at = ?", at.UTC()).Where("id = ?", id).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: touch token: %w", err)
	}
	return nil
}

// ListTokens returns every token, newest first.
func ListTokens(ctx context.Context, db bun.IDB) ([]APIToken, error) {
	var ts []APIToken
	if err := db.NewSelect().Model(&ts).OrderExpr("id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return ts, nil
}

// RevokeToken revokes a token; an unknown or already revoked one gives ErrNotFound.
func RevokeToken(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewUpdate().Model((*APIToken)(nil)).Set("revoked_at = ?", time.Now().UTC()).
		Where("id = ?", id).Where("revoked_at IS NULL").Exec(ctx)
	if err := affected(res, err); err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("store: token %d: %w", id, ErrNotFound)
		}
		return fmt.Errorf("store: revoke token: %w", err)
	}
	return nil
}

// TokenPrefix starts every API token so that leaked ones are easy to grep for.
const TokenPrefix = "smt_"

// NewTokenValue returns a new random token and the hash to store for it.
func NewTokenValue() (plain, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("store: token randomness: %w", err)
	}
	plain = TokenPrefix + hex.EncodeToString(b)
	return plain, HashToken(plain), nil
}

// HashToken is the stored form of a token.
func HashToken(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}
