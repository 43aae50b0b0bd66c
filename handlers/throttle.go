package handlers

import (
	"sync"
	"time"
)

// loginLimiter throttles failed logins per client address and per
// address+username, so guessing is slow without letting anyone lock out a user
// from everywhere.
type loginLimiter struct {
	mu      sync.Mutex
	entries map[string]*attempts
	window  time.Duration
	perIP   int
	perUser int
}

type attempts struct {
	fails []time.Time
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{entries: map[string]*attempts{}, window: 15 * time.Minute, perIP: 20, perUser: 5}
}

// blocked returns how long the client must wait, or 0.
func (l *loginLimiter) blocked(ip, user string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := l.waitLocked("ip:"+ip, l.perIP, now)
	if w := l.waitLocked("user:"+ip+"\x00"+user, l.perUser, now); w > wait {
		wait = w
	}
	return wait
}

func (l *loginLimiter) waitLocked(key string, limit int, now time.Time) time.Duration {
	a := l.entries[key]
	if a == nil {
		return 0
	}
	a.prune(now, l.window)
	if len(a.fails) < limit {
		return 0
	}
	return a.fails[len(a.fails)-limit].Add(l.window).Sub(now)
}

func (a *attempts) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(a.fails) && now.Sub(a.fails[i]) >= window {
		i++
	}
	a.fails = a.fails[i:]
}

// fail records a failed attempt.
func (l *loginLimiter) fail(ip, user string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) > 100_000 { // bound memory under a spray of addresses
		for k, a := range l.entries {
			a.prune(now, l.window)
			if len(a.fails) == 0 {
				delete(l.entries, k)
			}
		}
	}
	for _, k := range []string{"ip:" + ip, "user:" + ip + "\x00" + user} {
		a := l.entries[k]
		if a == nil {
			a = &attempts{}
			l.entries[k] = a
		}
		a.fails = append(a.fails, now)
		if len(a.fails) > 64 {
			a.fails = a.fails[len(a.fails)-64:]
		}
	}
}

// succeed forgets the user's failures from this address.
func (l *loginLimiter) succeed(ip, user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, "user:"+ip+"\x00"+user)
}
