package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// User roles.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// User is a console account.
type User struct {
	bun.BaseModel `bun:"table:users"`

	ID           int64     `bun:"id,pk,autoincrement"`
	Username     string    `bun:"username"`
	PasswordHash string    `bun:"password_hash"`
	Role         string    `bun:"role"`
	Email        string    `bun:"email"` // where failure notifications go when the user keeps a task
	Disabled     bool      `bun:"disabled"`
	CreatedAt    time.Time `bun:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at"`
}

// CountUsers returns how many users exist.
func CountUsers(ctx context.Context, db bun.IDB) (int, error) {
	n, err := db.NewSelect().Model((*User)(nil)).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: count users: %w", err)
	}
	return int(n), nil
}

// CreateUser inserts u; a taken username gives ErrDuplicate.
func CreateUser(ctx context.Context, db bun.IDB, u *User) error {
	now := time.Now().UTC()
	u.CreatedAt, u.UpdatedAt = now, now
	if _, err := db.NewInsert().Model(u).Exec(ctx); err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: user %q: %w", u.Username, ErrDuplicate)
		}
		return fmt.Errorf("store: create user: %w", err)
	}
	return nil
}

// GetUser returns the user with that username or ErrNotFound.
func GetUser(ctx context.Context, db bun.IDB, username string) (*User, error) {
	u := new(User)
	if err := db.NewSelect().Model(u).Where("username = ?", username).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: get user: %w", notFound(err))
	}
	return u, nil
}

// GetUserByID returns the user with that id or ErrNotFound.
func GetUserByID(ctx context.Context, db bun.IDB, id int64) (*User, error) {
	u := new(User)
	if err := db.NewSelect().Model(u).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: get user: %w", notFound(err))
	}
	return u, nil
}
