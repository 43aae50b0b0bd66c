package master

import (
	"context"
	"errors"
	"fmt"
	"github.com/schedulemaster-go/schedulemaster/locale"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
)

// Password rules: at least UserPasswordMin characters; bcrypt reads at most
// 72 bytes, so a longer password is refused rather than silently cut.
const (
	UserPasswordMin      = 10
	userPasswordMaxBytes = 72
)

var userNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// CheckUsername returns what is wrong with a new username, or "".
func CheckUsername(name string) string {
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

// CheckRole returns what is wrong with a role, or "".
func CheckRole(role string) string {
	if !store.ValidRole(role) {
		return fmt.Sprintf("must be admin or viewer, not %q", role)
	}
	return ""
}

// CheckEmail returns what is wrong with an optional email address, or "".
func CheckEmail(email string) string {
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

// CheckPassword returns what is wrong with a new password, or "". Forms call
// it to order their own confirmation check after it.
func CheckPassword(pw string) string {
	switch {
	case pw == "":
		return "is required"
	case utf8.RuneCountInString(pw) < UserPasswordMin:
		return fmt.Sprintf("must be at least %d characters", UserPasswordMin)
	case len(pw) > userPasswordMaxBytes:
		return fmt.Sprintf("must be at most %d bytes", userPasswordMaxBytes)
	}
	return ""
}

// HashPassword is the stored form of a password.
func HashPassword(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("master: hash password: %w", err)
	}
	return string(h), nil
}

// NewUser is a console user to create.
type NewUser struct {
	Username, Role, Email, Password string
}

// Check returns what is wrong with each field of a new user, or nil.
func (u NewUser) Check() protocol.FieldErrors {
	fe := protocol.FieldErrors{}
	for field, msg := range map[string]string{
		"username": CheckUsername(u.Username),
		"role":     CheckRole(u.Role),
		"email":    CheckEmail(u.Email),
		"password": CheckPassword(u.Password),
	} {
		if msg != "" {
			fe[field] = msg
		}
	}
	if len(fe) == 0 {
		return nil
	}
	return fe
}

// userRefusal maps the store's answer to a change of user name into a refusal.
func userRefusal(err error, name string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Errorf(KindNotFound, "there is no user %s", name)
	case errors.Is(err, store.ErrLastAdmin):
		return Errorf(KindState, "%s is the only enabled admin; make another user admin first, so that someone can still change things", name)
	case errors.Is(err, store.ErrDuplicate):
		return Errorf(KindDuplicate, "user %s already exists", name)
	}
	return err
}

// GetUser returns one user; an unknown name is ErrNotFound.
func (a *Accounts) GetUser(ctx context.Context, name string) (*store.User, error) {
	if p := PrincipalFrom(ctx); p != nil && !strings.EqualFold(p.Name, name) && !mayListUsers(p) {
		return nil, Errorf(KindForbidden, "forbidden: only cluster admins and viewers of every project read other users")
	}
	u, err := store.GetUser(ctx, a.db, name)
	if err != nil {
		return nil, userRefusal(err, name)
	}
	return u, nil
}

// CreateUser checks and stores a new user (field errors are a
// protocol.FieldErrors; a taken name is ErrDuplicate) and records the event.
func (a *Accounts) CreateUser(ctx context.Context, u NewUser) error {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	if fe := u.Check(); fe != nil {
		return fe
	}
	// A taken name is refused before the (deliberately slow) hashing; the
	// unique key still decides a race.
	switch _, err := store.GetUser(ctx, a.db, u.Username); {
	case err == nil:
		return userRefusal(store.ErrDuplicate, u.Username)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	hash, err := a.logins.hash(u.Password)
	if err != nil {
		return err
	}
	row := &store.User{Username: u.Username, PasswordHash: hash, Role: u.Role, Email: u.Email}
	if err := store.CreateUser(ctx, a.db, row); err != nil {
		return userRefusal(err, u.Username)
	}
	a.log.Info("user created", "username", u.Username, "role", u.Role, "by", ActorFrom(ctx))
	a.events.record(ctx, "user.create", store.TargetUser, u.Username, nil, "role "+u.Role)
	return nil
}

// UserPatch is a change of a user: the fields to change, at least one.
type UserPatch struct {
	Role     *string
	Disabled *bool
	Password *string
	Email    *string
}

// detail says what a patch changes, without the password itself.
func (p UserPatch) detail() string {
	var parts []string
	if p.Role != nil {
		parts = append(parts, "role "+*p.Role)
	}
	if p.Disabled != nil {
		parts = append(parts, fmt.Sprintf("disabled %t", *p.Disabled))
	}
	if p.Email != nil {
		if *p.Email == "" {
			parts = append(parts, "email none")
		} else {
			parts = append(parts, "email "+*p.Email)
		}
	}
	if p.Password != nil {
		parts = append(parts, "new password")
	}
	return strings.Join(parts, ", ")
}

// PatchUser makes all the changes of p together or none. The actor
// (ActorFrom(ctx)) cannot disable themself, and no change may leave the
// installation without an enabled admin.
func (a *Accounts) PatchUser(ctx context.Context, name string, p UserPatch) error {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	return a.patchUser(ctx, "user.update", name, p, true)
}

// ResetPassword sets a new password chosen by an admin.
func (a *Accounts) ResetPassword(ctx context.Context, name, password string) error {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	return a.patchUser(ctx, "user.password_reset", name, UserPatch{Password: &password}, false)
}

// ResetPasswordRandom is ResetPassword with a random password of the kind
// the first start gives user admin, returned so that the caller shows it once
// (`schedulemaster user reset-password`).
func (a *Accounts) ResetPasswordRandom(ctx context.Context, name string) (string, error) {
	if err := requireClusterAdmin(ctx); err != nil {
		return "", err
	}
	pw, err := randomPassword(randomPasswordLen)
	if err != nil {
		return "", err
	}
	if err := a.ResetPassword(ctx, name, pw); err != nil {
		return "", err
	}
	return pw, nil
}

// SetUserDisabled disables a user (their sessions stop working at once) or
// enables them again.
func (a *Accounts) SetUserDisabled(ctx context.Context, name string, disabled bool) error {
	if err := requireClusterAdmin(ctx); err != nil {
		return err
	}
	action := "user.enable"
	if disabled {
		action = "user.disable"
	}
	return a.patchUser(ctx, action, name, UserPatch{Disabled: &disabled}, false)
}

// patchUser is PatchUser recorded as action; the event says what changed
// only when withDetail (the action's name says it otherwise).
func (a *Accounts) patchUser(ctx context.Context, action, name string, p UserPatch, withDetail bool) error {
	if p.Role == nil && p.Disabled == nil && p.Password == nil && p.Email == nil {
		return Errorf(KindInvalid, "nothing to change: send role, disabled, password or email")
	}
	fe := protocol.FieldErrors{}
	if p.Role != nil {
		if msg := CheckRole(*p.Role); msg != "" {
			fe["role"] = msg
		}
	}
	if p.Email != nil {
		email := strings.TrimSpace(*p.Email)
		p.Email = &email
		if msg := CheckEmail(email); msg != "" {
			fe["email"] = msg
		}
	}
	if p.Password != nil {
		if msg := CheckPassword(*p.Password); msg != "" {
			fe["password"] = msg
		}
	}
	if len(fe) > 0 {
		return fe
	}
	detail := ""
	if withDetail {
		detail = p.detail()
	}
	if p.Disabled != nil && *p.Disabled && name == ActorFrom(ctx) {
		err := Errorf(KindState, "you cannot disable yourself; ask another admin")
		a.events.record(ctx, action, store.TargetUser, name, err, detail)
		return err
	}
	var hash string
	if p.Password != nil {
		if u, err := store.GetUser(ctx, a.db, name); err == nil && u.AuthMethod != "" {
			err := Errorf(KindState, "%s signs in with %s and has no local password", name, u.AuthMethod)
			a.events.record(ctx, action, store.TargetUser, name, err, detail)
			return err
		}
		h, err := a.logins.hash(*p.Password)
		if err != nil {
			return err
		}
		hash = h
	}
	err := a.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := store.GetUser(ctx, tx, name); err != nil {
			return err
		}
		if p.Role != nil {
			if err := store.UpdateUserRole(ctx, tx, name, *p.Role); err != nil {
				return err
			}
		}
		if p.Disabled != nil {
			if err := store.SetUserDisabled(ctx, tx, name, *p.Disabled); err != nil {
				return err
			}
		}
		if p.Email != nil {
			if err := store.SetUserEmail(ctx, tx, name, *p.Email); err != nil {
				return err
			}
		}
		if p.Password != nil {
			return store.SetUserPassword(ctx, tx, name, hash)
		}
		return nil
	})
	if err != nil {
		refusal := userRefusal(err, name)
		if refusal == err {
			return fmt.Errorf("master: user %s: %w", name, err)
		}
		a.log.Warn("user change refused", "action", action, "username", name, "by", ActorFrom(ctx), "err", err)
		if !errors.Is(err, store.ErrNotFound) {
			a.events.record(ctx, action, store.TargetUser, name, refusal, detail)
		}
		return refusal
	}
	a.log.Info("user changed", "action", action, "username", name, "by", ActorFrom(ctx), "changes", detail)
	a.events.record(ctx, action, store.TargetUser, name, nil, detail)
	return nil
}

// ChangeOwnPassword changes the password of u, who must give the current one
// and the new one twice, from client address ip. The current password is
// checked under the login throttle (a spent window is KindLimited); a wrong
// one is ErrUnauthorized; other problems are field errors of
// current_password, new_password and new_password_confirm. On success u
// carries the new hash.
func (a *Accounts) ChangeOwnPassword(ctx context.Context, u *store.User, ip, current, next, confirm string) error {
	if err := refuseToken(ctx, "change its owner's password"); err != nil {
		return err
	}
	if u.AuthMethod != "" {
		return Errorf(KindState, "you sign in with %s and have no local password to change", u.AuthMethod)
	}
	fe := protocol.FieldErrors{}
	var wrong error
	var ticket *loginTicket
	if current != "" && len(current) <= 256 {
		done, ok := a.life.track()
		if !ok {
			return Errorf(KindState, "the master is stopping")
		}
		defer done()
		t, err := a.logins.reserve(ctx, ip, u.Username, time.Now())
		if err != nil {
			return err
		}
		ticket = t
	}
	switch {
	case current == "":
		fe["current_password"] = "is required"
	case len(current) > 256 || !a.logins.checkPassword([]byte(u.PasswordHash), current):
		wrong = &Error{Kind: KindUnauthorized, Msg: "the current password is wrong"}
		a.events.record(ctx, "user.password_change", store.TargetUser, u.Username, wrong, "")
		fe["current_password"] = "is wrong"
	}
	if msg := CheckPassword(next); msg != "" {
		fe["new_password"] = msg
	} else if next == current {
		fe["new_password"] = "must differ from the current password"
	} else if confirm != next {
		fe["new_password_confirm"] = "does not match the new password"
	}
	if wrong != nil {
		a.logins.failed(ctx, time.Now())
		return &Error{Kind: KindUnauthorized, Msg: "the current password is wrong", Fields: fe}
	}
	if ticket != nil {
		a.logins.succeeded(ctx, ticket, time.Now())
	}
	if len(fe) > 0 {
		return fe
	}
	hash, err := a.logins.hash(next)
	if err != nil {
		return err
	}
	if err := store.SetUserPassword(ctx, a.db, u.Username, hash); err != nil {
		return fmt.Errorf("master: user %s: %w", u.Username, err)
	}
	u.PasswordHash = hash
	a.log.Info("own password changed", "username", u.Username)
	a.events.record(ctx, "user.password_change", store.TargetUser, u.Username, nil, "")
	return nil
}

// ChangeOwnLocale sets the console language of the user named: "" (follow
// the browser), "en" or "zh-CN"; anything else is a field error of locale.
func (a *Accounts) ChangeOwnLocale(ctx context.Context, name, lang string) error {
	if !locale.ValidPreference(lang) {
		return protocol.FieldErrors{"locale": "must be empty, en or zh-CN"}
	}
	if err := store.SetUserLocale(ctx, a.db, name, lang); err != nil {
		return fmt.Errorf("master: user %s: %w", name, err)
	}
	a.log.Info("own language changed", "username", name, "locale", lang)
	return nil
}

// ChangeOwnEmail sets or clears the email of the user named; a bad address
// is a field error of email.
func (a *Accounts) ChangeOwnEmail(ctx context.Context, name, email string) error {
	if err := refuseToken(ctx, "change its owner's e-mail"); err != nil {
		return err
	}
	if msg := CheckEmail(email); msg != "" {
		return protocol.FieldErrors{"email": msg}
	}
	if err := store.SetUserEmail(ctx, a.db, name, email); err != nil {
		return fmt.Errorf("master: user %s: %w", name, err)
	}
	a.log.Info("own email changed", "username", name)
	a.events.record(ctx, "user.email_change", store.TargetUser, name, nil, "")
	return nil
}

// refuseToken refuses what only a person signed in may do: an API token
// acts for its owner in the projects, never on the owner's own account
// (what signs the owner in or receives the owner's notices).
func refuseToken(ctx context.Context, what string) error {
	if p := PrincipalFrom(ctx); p != nil && p.Token != "" {
		return Errorf(KindForbidden, "forbidden: an API token cannot %s; sign in to the console", what)
	}
	return nil
}
