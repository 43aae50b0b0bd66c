package master

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/uptrace/bun"
)

// The login throttle: every password check (a login, or the current password
// when changing one's own) first reserves an attempt in the database, which
// every master shares. A reservation counts while its check runs, a wrong
// password keeps it, a right one gives it back. So at most LoginLimitPerUser
// wrong passwords are ever checked per LoginWindow for one user name from one
// address, and at most LoginLimitPerAddress for all names from one address,
// however many requests race and however many masters they reach. There is no
// limit per user name from everywhere: it would let anyone lock a user out.
const (
	LoginWindow          = 15 * time.Minute
	LoginLimitPerUser    = 5
	LoginLimitPerAddress = 20
	// loginPruneEvery is how many refused or failed attempts pass between
	// prunes of the shared table, which many addresses would grow.
	loginPruneEvery = 256
)

// throttleAddress is the address a client is throttled by: an IPv4 address,
// or the /64 of an IPv6 one (one host commonly holds a whole /64).
func throttleAddress(ip string) string {
	a := net.ParseIP(ip)
	if a == nil {
		return ip
	}
	if a.To4() != nil {
		return a.To4().String()
	}
	return a.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// throttleKeys are the table keys of an address and of that address with a
// user name. They are hashed: a name may be anything a client types.
func throttleKeys(ip, user string) (addrKey, userKey string) {
	ip = throttleAddress(ip)
	h := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	return "ip:" + h(ip), "user:" + h(ip+"\x00"+user)
}

// loginTicket is an attempt reserved under both keys.
type loginTicket struct {
	addrKey, userKey     string
	addrStart, userStart time.Time
}

// throttleWrite bounds a throttle write. It outlives its request (a guesser
// who hangs up must still be counted) but not Stop; callers hold track.
const throttleWrite = 5 * time.Second

// loginThrottle is the shared login throttle of one master: it reserves,
// gives back and prunes attempts in the table every master shares, and
// counts the password checks it allowed.
type loginThrottle struct {
	db   bun.IDB
	log  *slog.Logger
	life *lifecycle
	// cost is the bcrypt cost of new password hashes; dummy is a hash of
	// that cost, compared for an unknown user so that a login with one
	// takes as long as with a real one.
	cost  int
	dummy []byte
	// checks counts bcrypt comparisons; refusals paces the prunes of the
	// shared table.
	checks   atomic.Int64
	refusals atomic.Int64
}

// reserve reserves one password check for user from ip, or refuses with
// a KindLimited error that says how long to wait.
func (l *loginThrottle) reserve(ctx context.Context, ip, user string, now time.Time) (*loginTicket, error) {
	ctx, cancel := l.life.detached(ctx, throttleWrite)
	defer cancel()
	addrKey, userKey := throttleKeys(ip, user)
	t := &loginTicket{addrKey: addrKey, userKey: userKey}
	refuse := func(until time.Time) error {
		if l.refusals.Add(1)%loginPruneEvery == 0 {
			l.prune(ctx, now)
		}
		wait := max(until.Sub(now), time.Second)
		return &Error{Kind: KindLimited, RetryAfter: wait,
			Msg: fmt.Sprintf("too many failed logins; try again in %s", wait.Round(time.Second))}
	}
	ok, until, start, err := store.ReserveLoginAttempt(ctx, l.db, userKey, LoginLimitPerUser, LoginWindow, now)
	if errors.Is(err, store.ErrConflict) {
		return nil, refuse(now.Add(time.Second)) // a crowd on one key: fail closed, briefly
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse(until)
	}
	t.userStart = start
	ok, until, start, err = store.ReserveLoginAttempt(ctx, l.db, addrKey, LoginLimitPerAddress, LoginWindow, now)
	if errors.Is(err, store.ErrConflict) {
		return nil, refuse(now.Add(time.Second))
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse(until)
	}
	t.addrStart = start
	return t, nil
}

// succeeded gives the attempt back under both keys: a right password
// costs nothing. It gives back only its own attempt, never the failures
// counted beside it, so a success among racing guesses lets none more through.
func (l *loginThrottle) succeeded(ctx context.Context, t *loginTicket, now time.Time) {
	ctx, cancel := l.life.detached(ctx, throttleWrite)
	defer cancel()
	if err := store.ReleaseLoginAttempt(ctx, l.db, t.addrKey, t.addrStart); err != nil {
		l.log.Warn("login throttle: release the address's attempt", "err", err)
	}
	if err := store.ReleaseLoginAttempt(ctx, l.db, t.userKey, t.userStart); err != nil {
		l.log.Warn("login throttle: release the user's attempt", "err", err)
	}
	l.prune(ctx, now)
}

// failed counts a wrong password toward the next prune.
func (l *loginThrottle) failed(ctx context.Context, now time.Time) {
	if l.refusals.Add(1)%loginPruneEvery == 0 {
		ctx, cancel := l.life.detached(ctx, throttleWrite)
		defer cancel()
		l.prune(ctx, now)
	}
}

// prune deletes the attempts older than the window.
func (l *loginThrottle) prune(ctx context.Context, now time.Time) {
	if _, err := store.PruneLoginFailures(ctx, l.db, now.Add(-LoginWindow), now); err != nil {
		l.log.Warn("login throttle: prune", "err", err)
	}
}

// checkPassword compares a password with a bcrypt hash, counting the check.
// newLoginThrottle makes the throttle with its dummy hash of the given cost
// (0: bcrypt.DefaultCost).
func newLoginThrottle(db bun.IDB, log *slog.Logger, life *lifecycle, cost int) *loginThrottle {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	// Only tests set the cost (there is no flag for it); one out of
	// bcrypt's range is clamped into it rather than failing the master.
	cost = min(max(cost, bcrypt.MinCost), bcrypt.MaxCost)
	dummy, _ := bcrypt.GenerateFromPassword([]byte("not-a-real-password"), cost)
	return &loginThrottle{db: db, log: log, life: life, cost: cost, dummy: dummy}
}

// hash is the stored form of a new password, at the configured cost.
func (l *loginThrottle) hash(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), l.cost)
	if err != nil {
		return "", fmt.Errorf("master: hash password: %w", err)
	}
	return string(h), nil
}

func (l *loginThrottle) checkPassword(hash []byte, password string) bool {
	l.checks.Add(1)
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
}

// PasswordChecks is how many passwords this master has compared with a hash
// (logins and current-password checks): what the throttle bounds.
func (a *Accounts) PasswordChecks() int64 { return a.logins.checks.Load() }

// Login checks a user's password from a client address under the shared
// throttle and returns the user. With a Directory configured, a user with no
// local account (or one the directory created) is checked by the directory
// under the same throttle (see loginDirectory). A wrong name or password, or a disabled
// user, is KindUnauthorized with one sentence for all (an unknown user takes
// as long as a known one); a spent window is KindLimited with RetryAfter.
func (a *Accounts) Login(ctx context.Context, ip, username, password string) (*store.User, error) {
	// Counted as background work: Stop waits for the throttle's writes.
	done, ok := a.life.track()
	if !ok {
		return nil, Errorf(KindState, "the master is stopping")
	}
	defer done()
	now := time.Now()
	t, err := a.logins.reserve(ctx, ip, username, now)
	if err != nil {
		return nil, err
	}
	var u *store.User
	// A name the local rules refuse (a NUL, invalid UTF-8) names no user and
	// is not sent to the database, whose driver may choke on it.
	if CheckUsername(username) == "" {
		var err error
		if u, err = store.GetUser(ctx, a.db, username); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	// A local user (one with a local password) is checked here only, so a
	// directory entry never signs in as a local account and local accounts
	// work while the directory is down; anyone else goes to the directory.
	if a.directory != nil && (u == nil || u.AuthMethod == a.directory.Method()) {
		return a.loginDirectory(ctx, t, now, username, password)
	}
	hash := a.logins.dummy
	if u != nil {
		hash = []byte(u.PasswordHash)
	}
	// Break glass: with local passwords limited to cluster admins, a right
	// password of anyone else is still no way in, and is answered exactly
	// as a wrong one (the answer names the rule for both), so the refusal
	// does not confirm a password.
	adminsOnly := a.settings != nil && a.settings.inForce().LocalAdminsOnly
	wrong := Errorf(KindUnauthorized, "wrong username or password")
	if adminsOnly {
		wrong = Errorf(KindUnauthorized, "wrong username or password; local passwords are for cluster admins only: sign in with your organisation's account")
	}
	if !a.logins.checkPassword(hash, password) || u == nil || u.Disabled {
		a.logins.failed(ctx, now)
		return nil, wrong
	}
	if adminsOnly && u.Role != RoleAdmin {
		a.logins.failed(ctx, now)
		a.events.record(WithActor(ctx, u.Username), "user.login", store.TargetUser, u.Username,
			Errorf(KindForbidden, "local passwords are for cluster admins only"), "method local")
		return nil, wrong
	}
	a.logins.succeeded(ctx, t, now)
	ctx = WithActor(ctx, u.Username)
	a.events.record(ctx, "user.login", store.TargetUser, u.Username, nil, "method local")
	return u, nil
}
