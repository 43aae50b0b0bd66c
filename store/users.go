package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// User roles.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
	// RoleNone is a user with no cluster role, who acts only through the
	// roles of project memberships.
	RoleNone = "none"
)

// User is a console account.
type User struct {
	bun.BaseModel `bun:"table:users"`

	ID           int64  `bun:"id,pk,autoincrement"`
	Username     string `bun:"username"`
	PasswordHash string `bun:"password_hash"`
	Role         string `bun:"role"`
	Email        string `bun:"email"` // where failure notifications go when the user keeps a task
	Disabled     bool   `bun:"disabled"`
	// AuthMethod is "" for a local user (password hash here), or the
	// external method (e.g. "ldap", "oidc") that created the user and signs them in.
	AuthMethod string `bun:"auth_method"`
	// ExternalSubject is the OIDC provider's subject of an OIDC user: the
	// name stays bound to that person.
	ExternalSubject string `bun:"external_subject"`
	// Locale is the console language the user chose: "" follows the
	// browser, else "en" or "zh-CN".
	Locale    string    `bun:"locale"`
	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`
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
	err := mayFail(ctx, db, func(ctx context.Context, db bun.IDB) error {
		_, err := db.NewInsert().Model(u).Exec(ctx)
		return err
	})
	if err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: user %q: %w", u.Username, ErrDuplicate)
		}
		return fmt.Errorf("store: create user: %w", err)
	}
	return nil
}

// GetUser returns the user with that username, compared case-folded, or
// ErrNotFound.
func GetUser(ctx context.Context, db bun.IDB, username string) (*User, error) {
	u := new(User)
	if err := db.NewSelect().Model(u).Where(usernameIs(db), username).Scan(ctx); err != nil {
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

// ErrLastAdmin means a change would leave no enabled admin.
var ErrLastAdmin = errors.New("store: no enabled admin would be left")

// ValidRole reports whether role is one of RoleAdmin, RoleViewer and RoleNone.
func ValidRole(role string) bool { return role == RoleAdmin || role == RoleViewer || role == RoleNone }

// ListUsers returns users ordered by username; limit <= 0 means all of them.
func ListUsers(ctx context.Context, db bun.IDB, limit, offset int) ([]User, error) {
	var us []User
	q := db.NewSelect().Model(&us).OrderExpr("username ASC")
	if limit > 0 {
		q = q.Limit(int64(limit))
	}
	if offset > 0 {
		q = q.Offset(int64(offset))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: list users: %w", err)
	}
	return us, nil
}

// CountActiveAdmins returns how many enabled users have the admin role.
func CountActiveAdmins(ctx context.Context, db bun.IDB) (int, error) {
	n, err := db.NewSelect().Model((*User)(nil)).Where("role = ?", RoleAdmin).Where("disabled = ?", false).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: count admins: %w", err)
	}
	return int(n), nil
}

// UpdateUserRole sets a user's role. Demoting the last enabled admin gives
// ErrLastAdmin; an unknown user gives ErrNotFound.
func UpdateUserRole(ctx context.Context, db bun.IDB, username, role string) error {
	if !ValidRole(role) {
		return fmt.Errorf("store: role %q is not admin or viewer", role)
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		cur, err := GetUser(ctx, tx, username)
		if err != nil {
			return err
		}
		if err := updateUser(ctx, tx, username, role != RoleAdmin, func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Set("role = ?", role)
		}); err != nil {
			return err
		}
		if cur.Role == role {
			return nil
		}
		// A session must not keep the rights of a role the user lost (or gain
		// ones silently): a role change ends every session.
		return DeleteUserSessions(ctx, tx, username)
	})
}

// SetUserDisabled disables or enables a user and ends all their sessions, so
// enabling a user again never revives an old cookie. Disabling the last
// enabled admin gives ErrLastAdmin; an unknown user gives ErrNotFound.
func SetUserDisabled(ctx context.Context, db bun.IDB, username string, disabled bool) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := updateUser(ctx, tx, username, disabled, func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Set("disabled = ?", disabled)
		}); err != nil {
			return err
		}
		return DeleteUserSessions(ctx, tx, username)
	})
}

// SetUserPassword stores a new bcrypt hash and ends all the user's sessions
// (a user changing their own password is given a new one by the caller); an
// unknown user gives ErrNotFound.
func SetUserPassword(ctx context.Context, db bun.IDB, username, hash string) error {
	if hash == "" {
		return errors.New("store: empty password hash")
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := updateUser(ctx, tx, username, false, func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Set("password_hash = ?", hash)
		}); err != nil {
			return err
		}
		return DeleteUserSessions(ctx, tx, username)
	})
}

// SetUserExternal sets an external user's email and subject (kept as the
// identity provider says them at each sign-in); an unknown user gives ErrNotFound.
func SetUserExternal(ctx context.Context, db bun.IDB, username, email, subject string) error {
	return updateUser(ctx, db, username, false, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return q.Set("email = ?", email).Set("external_subject = ?", subject)
	})
}

// SetUserEmail sets (or, with "", clears) a user's email; an unknown user gives ErrNotFound.
func SetUserEmail(ctx context.Context, db bun.IDB, username, email string) error {
	return updateUser(ctx, db, username, false, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return q.Set("email = ?", email)
	})
}

// SetUserLocale sets a user's console language ("" follows the browser); an
// unknown user gives ErrNotFound.
func SetUserLocale(ctx context.Context, db bun.IDB, username, locale string) error {
	return updateUser(ctx, db, username, false, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return q.Set("locale = ?", locale)
	})
}

// updateUser applies set to one user in a transaction. When the change may
// take an admin away (demote, disable), the enabled admins are read first
// (locked on MySQL and PostgreSQL; SQLite transactions are already
// exclusive), so two
// concurrent changes cannot each leave the other as the last admin and then
// remove it too.
func updateUser(ctx context.Context, db bun.IDB, username string, removesAdmin bool, set func(*bun.UpdateQuery) *bun.UpdateQuery) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if removesAdmin {
			var admins []User
			q := tx.NewSelect().Model(&admins).Column("id", "username").
				Where("role = ?", RoleAdmin).Where("disabled = ?", false).OrderExpr("id ASC")
			if tx.Dialect().Name() != dialect.SQLite {
				q = q.For("UPDATE")
			}
			if err := q.Scan(ctx); err != nil {
				return fmt.Errorf("store: read admins: %w", err)
			}
			if len(admins) == 1 && admins[0].Username == username {
				return fmt.Errorf("store: user %q: %w", username, ErrLastAdmin)
			}
		}
		q := tx.NewUpdate().Model((*User)(nil)).Set("updated_at = ?", time.Now().UTC()).Where("username = ?", username)
		res, err := set(q).Exec(ctx)
		if err := affected(res, err); err != nil {
			if !errors.Is(err, ErrConflict) {
				return fmt.Errorf("store: update user: %w", err)
			}
			// No row changed: either there is no such user, or (MySQL counts
			// changed rows, not matched ones) nothing differed at all.
			if _, gerr := GetUser(ctx, tx, username); gerr != nil {
				return gerr
			}
		}
		return nil
	})
}

// usernameIs is the condition "the user named ?" as names compare
// everywhere: case-folded, the way the unique index of every engine folds
// them (so "Admin" is admin, and a second "ADMIN" cannot exist), on that
// index.
func usernameIs(db bun.IDB) string {
	if db.Dialect().Name() == dialect.MySQL {
		return "username_ci = LOWER(?)"
	}
	return "lower(username) = lower(?)"
}
