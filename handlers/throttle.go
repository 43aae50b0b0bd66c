package handlers

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/store"
)

// maxThrottleEntries bounds the limiter's memory (about 200 bytes an entry).
// A guesser who keeps failing stays at the front of the LRU, so only an
// attacker with this many real addresses can push an entry out.
const maxThrottleEntries = 32768

// loginLimiter throttles failed logins per client address and per
// address+username, so guessing is slow without letting anyone lock out a user
// from everywhere. It keeps at most maxEntries keys (least recently failed
// out first) and does O(1) work per check and failure.
type loginLimiter struct {
	mu         sync.Mutex
	entries    map[string]*list.Element
	lru        *list.List // of *attempts, most recent failure at the front
	maxEntries int
	window     time.Duration
	perIP      int
	perUser    int
	// failures counts the failures recorded by this process: every
	// pruneEvery-th one prunes the shared table.
	failures atomic.Int64
}

// pruneEvery is how many failed logins pass between prunes of the shared
// login_failures table, which an attacker with many addresses would grow.
const pruneEvery = 256

// attempts keeps the times (unix ns) of a key's last `limit` failures in a ring.
type attempts struct {
	key   string
	fails []int64
	next  int // slot of the oldest failure once the ring is full
	n     int // failures recorded, capped at len(fails)
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{entries: map[string]*list.Element{}, lru: list.New(), maxEntries: maxThrottleEntries,
		window: 15 * time.Minute, perIP: 20, perUser: 5}
}

// throttleKey is the address a client is throttled by: an IPv4 address, or
// the /64 of an IPv6 one (one host commonly holds a whole /64).
func throttleKey(ip string) string {
	a := net.ParseIP(ip)
	if a == nil {
		return ip
	}
	if a.To4() != nil {
		return a.To4().String()
	}
	return a.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// blocked returns how long the client must wait, or 0.
func (l *loginLimiter) blocked(ip, user string, now time.Time) time.Duration {
	ip = throttleKey(ip)
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := l.waitLocked("ip:"+ip, now)
	if w := l.waitLocked("user:"+ip+"\x00"+user, now); w > wait {
		wait = w
	}
	return wait
}

// waitLocked is how long the key must wait: its limit-th last failure plus
// the window, if that is still ahead.
func (l *loginLimiter) waitLocked(key string, now time.Time) time.Duration {
	el := l.entries[key]
	if el == nil {
		return 0
	}
	a := el.Value.(*attempts)
	if a.n < len(a.fails) {
		return 0
	}
	until := time.Unix(0, a.fails[a.next]).Add(l.window)
	if !until.After(now) {
		return 0
	}
	return until.Sub(now)
}

// fail records a failed attempt.
func (l *loginLimiter) fail(ip, user string, now time.Time) {
	ip = throttleKey(ip)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked("ip:"+ip, l.perIP, now)
	l.recordLocked("user:"+ip+"\x00"+user, l.perUser, now)
}

func (l *loginLimiter) recordLocked(key string, limit int, now time.Time) {
	var a *attempts
	if el := l.entries[key]; el != nil {
		l.lru.MoveToFront(el)
		a = el.Value.(*attempts)
	} else {
		if l.lru.Len() >= l.maxEntries {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.entries, old.Value.(*attempts).key)
		}
		a = &attempts{key: key, fails: make([]int64, limit)}
		l.entries[key] = l.lru.PushFront(a)
	}
	a.fails[a.next] = now.UnixNano()
	a.next = (a.next + 1) % len(a.fails)
	if a.n < len(a.fails) {
		a.n++
	}
}

// succeed forgets the user's failures from this address.
func (l *loginLimiter) succeed(ip, user string) {
	ip = throttleKey(ip)
	l.mu.Lock()
	defer l.mu.Unlock()
	key := "user:" + ip + "\x00" + user
	if el := l.entries[key]; el != nil {
		l.lru.Remove(el)
		delete(l.entries, key)
	}
}

// size is how many keys the limiter holds.
func (l *loginLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// sharedThrottleKeys are the keys of a client address and of that address
// with a username in the login_failures table every master shares. They are
// hashed: a username may be anything a client types, the column is bounded.
func sharedThrottleKeys(ip, user string) (ipKey, userKey string) {
	ip = throttleKey(ip)
	h := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	return "ip:" + h(ip), "user:" + h(ip+"\x00"+user)
}

// throttleCtx lets a throttle write finish when its request is gone: a
// guesser who hangs up must still be counted.
func throttleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// loginWait is how long a login of user from ip must wait: the longer of this
// master's own count (cheap, exact, and what still works if the database
// errs) and the count every master shares in the database, so a guesser gains
// nothing by spreading guesses over masters.
func (s *server) loginWait(ctx context.Context, ip, user string, now time.Time) time.Duration {
	wait := s.limiter.blocked(ip, user, now)
	ipKey, userKey := sharedThrottleKeys(ip, user)
	until, err := store.LoginBlockedUntil(ctx, s.st.DB, []string{ipKey, userKey}, now)
	if err != nil {
		s.log.Error("login throttle: read shared failures", "err", err)
		return wait
	}
	if w := until.Sub(now); w > wait {
		wait = w
	}
	return wait
}

// loginFailed counts a failed login here and in the shared table.
func (s *server) loginFailed(ctx context.Context, ip, user string, now time.Time) {
	l := s.limiter
	l.fail(ip, user, now)
	ctx, cancel := throttleCtx(ctx)
	defer cancel()
	ipKey, userKey := sharedThrottleKeys(ip, user)
	for _, k := range []struct {
		key   string
		limit int
	}{{ipKey, l.perIP}, {userKey, l.perUser}} {
		if err := store.RecordLoginFailure(ctx, s.st.DB, k.key, k.limit, l.window, now); err != nil {
			s.log.Error("login throttle: record shared failure", "err", err)
		}
	}
	if l.failures.Add(1)%pruneEvery == 0 {
		s.pruneLoginFailures(ctx, now)
	}
}

// loginSucceeded forgets the user's failures from this address, here and in
// the shared table, and prunes the table (logins are rare: it costs nothing).
func (s *server) loginSucceeded(ctx context.Context, ip, user string, now time.Time) {
	s.limiter.succeed(ip, user)
	ctx, cancel := throttleCtx(ctx)
	defer cancel()
	_, userKey := sharedThrottleKeys(ip, user)
	if err := store.ClearLoginFailures(ctx, s.st.DB, userKey); err != nil {
		s.log.Error("login throttle: clear shared failures", "err", err)
	}
	s.pruneLoginFailures(ctx, now)
}

func (s *server) pruneLoginFailures(ctx context.Context, now time.Time) {
	if _, err := store.PruneLoginFailures(ctx, s.st.DB, now.Add(-s.limiter.window), now); err != nil {
		s.log.Warn("login throttle: prune shared failures", "err", err)
	}
}
