package protocol

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestNonceCacheRefusesReuse(t *testing.T) {
	t.Parallel()
	c := NewNonceCache(10)
	now := time.Now()
	n := NewNonce()
	if !c.Use(n, now) {
		t.Fatal("fresh nonce refused")
	}
	if c.Use(n, now.Add(2*MaxClockSkew-time.Second)) {
		t.Error("nonce accepted again while its timestamp could still be valid")
	}
	for _, bad := range []string{"", "short", strings.Repeat("a", 15), strings.Repeat("a", 129)} {
		if c.Use(bad, now) {
			t.Errorf("nonce of length %d accepted", len(bad))
		}
	}
	if !c.Use(strings.Repeat("b", 16), now) || !c.Use(strings.Repeat("c", 128), now) {
		t.Error("nonces of length 16 and 128 refused")
	}
}

func TestNonceCacheBounded(t *testing.T) {
	t.Parallel()
	const limit = 50
	c := NewNonceCache(limit)
	now := time.Now()
	nonce := func(i int) string { return fmt.Sprintf("nonce-%016d", i) }
	for i := range limit {
		if !c.Use(nonce(i), now) {
			t.Fatalf("nonce %d refused below the limit", i)
		}
	}
	// Full of live nonces: fail closed rather than forget one.
	if c.Use(nonce(limit), now.Add(time.Minute)) {
		t.Fatal("a full cache accepted a new nonce")
	}
	if c.Use(nonce(0), now.Add(time.Minute)) {
		t.Fatal("a full cache forgot a live nonce")
	}
	if got := len(c.seen); got != limit {
		t.Fatalf("cache holds %d, want %d", got, limit)
	}
	// Once they expire, new nonces are accepted and the expired ones evicted.
	later := now.Add(2*MaxClockSkew + time.Second)
	for i := limit; i < 10*limit; i++ {
		if !c.Use(nonce(i), later.Add(time.Duration(i-limit)*2*MaxClockSkew/time.Duration(limit))) {
			t.Fatalf("nonce %d refused after the earlier ones expired", i)
		}
		if got := len(c.seen); got > limit {
			t.Fatalf("cache grew to %d entries, limit %d", got, limit)
		}
	}
}
