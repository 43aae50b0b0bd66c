package protocol

import (
	"sync"
	"time"
)

// NonceCache remembers nonces for twice the allowed clock skew so that a signed
// request cannot be replayed while its timestamp is still accepted.
type NonceCache struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	ttl   time.Duration
	limit int
}

// NewNonceCache returns a cache holding at most limit nonces.
func NewNonceCache(limit int) *NonceCache {
	return &NonceCache{seen: make(map[string]time.Time), ttl: 2 * MaxClockSkew, limit: limit}
}

// Use records nonce and reports whether it was unseen. When the cache is full of
// live nonces it refuses, which fails closed instead of forgetting one.
func (c *NonceCache) Use(nonce string, now time.Time) bool {
	if len(nonce) < 16 || len(nonce) > 128 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if exp, ok := c.seen[nonce]; ok && now.Before(exp) {
		return false
	}
	if len(c.seen) >= c.limit {
		for k, exp := range c.seen {
			if !now.Before(exp) {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= c.limit {
			return false
		}
	}
	c.seen[nonce] = now.Add(c.ttl)
	return true
}
