package handlers

import (
	"container/list"
	"net"
	"sync"
	"time"
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
}

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
