package handlers

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// TestLoginLimiterMemoryBound: a million distinct addresses each failing
// once keep the limiter at its bound, in a bounded heap, and a guesser who
// keeps failing is still throttled amid them.
func TestLoginLimiterMemoryBound(t *testing.T) {
	l := newLoginLimiter()
	now := time.Now()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ip := make(net.IP, 4)
	for i := range 1_000_000 {
		ip[0], ip[1], ip[2], ip[3] = 10, byte(i>>16), byte(i>>8), byte(i)
		l.fail(ip.String(), "admin", now)
		if i%1000 == 0 {
			for range 2 {
				l.fail("192.0.2.1", "admin", now) // the persistent guesser
			}
		}
	}
	if n := l.size(); n > maxThrottleEntries {
		t.Fatalf("limiter holds %d keys, bound %d", n, maxThrottleEntries)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Fatalf("limiter heap %d MB after 1e6 addresses, want < 32 MB", grew>>20)
	}
	if l.blocked("192.0.2.1", "admin", now) == 0 {
		t.Fatal("the persistent guesser is not throttled")
	}
	if l.blocked("192.0.2.99", "admin", now) != 0 {
		t.Fatal("a fresh address is throttled")
	}
}

// TestLoginLimiterWindow: the limit-th failure blocks until the window has
// passed since the oldest of them; IPv6 addresses count per /64.
func TestLoginLimiterWindow(t *testing.T) {
	l := newLoginLimiter()
	t0 := time.Now()
	for i := range l.perUser {
		if w := l.blocked("2001:db8::1", "bob", t0); w != 0 {
			t.Fatalf("blocked after %d failures", i)
		}
		l.fail("2001:db8::"+string(rune('1'+i)), "bob", t0.Add(time.Duration(i)*time.Second))
	}
	w := l.blocked("2001:db8::ffff", "bob", t0.Add(10*time.Second))
	if w != l.window-10*time.Second {
		t.Fatalf("wait %s, want %s (same /64)", w, l.window-10*time.Second)
	}
	if w := l.blocked("2001:db8::1", "bob", t0.Add(l.window-time.Second)); w != time.Second {
		t.Fatalf("wait a second before the window's end %s, want 1s", w)
	}
	if w := l.blocked("2001:db8::1", "bob", t0.Add(l.window)); w != 0 {
		t.Fatalf("wait once the window has passed %s, want 0", w)
	}
	if w := l.blocked("2001:db9::1", "bob", t0); w != 0 {
		t.Fatal("another /64 is throttled")
	}
	l.succeed("2001:db8::1", "bob")
	if w := l.blocked("2001:db8::1", "bob", t0.Add(10*time.Second)); w != 0 {
		t.Fatalf("still blocked after a success: %s", w)
	}
}

// TestSafeNext accepts only plain same-site paths.
func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "/dashboard",
		"/tasks":               "/tasks",
		"/tasks/abc?offset=50": "/tasks/abc?offset=50",
		"/tasks?title=a%2Fb":   "/tasks?title=a%2Fb",
		"/\t/evil.example":     "/dashboard",
		"/\n/evil.example":     "/dashboard",
		"/\r/evil.example":     "/dashboard",
		"/\\/evil.example":     "/dashboard",
		"/\\evil.example":      "/dashboard",
		"/a\\b":                "/dashboard",
		"//evil":               "/dashboard",
		"///evil":              "/dashboard",
		"/%2F/evil":            "/dashboard",
		"/%2f/evil":            "/dashboard",
		"/%5C/evil":            "/dashboard",
		"https://evil":         "/dashboard",
		"evil.example":         "/dashboard",
		"javascript:alert(1)":  "/dashboard",
		"/ /evil":              "/dashboard",
		"/\x00":                "/dashboard",
		"/\xff":                "/dashboard",
		"/%zz":                 "/dashboard",
		"/users/bob%40x/edit":  "/users/bob%40x/edit",
		"/\u2028/evil.example": "/dashboard",
		"/\u00a0/evil.example": "/dashboard",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
