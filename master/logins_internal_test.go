package master

import "testing"

// IPv6 clients are throttled per /64 (one host commonly holds a whole /64);
// IPv4 per address; the user name is part of the per-user key only.
func TestThrottleKeys(t *testing.T) {
	t.Parallel()
	a1, u1 := throttleKeys("2001:db8::1", "bob")
	a2, u2 := throttleKeys("2001:db8::ffff:1", "bob")
	if a1 != a2 || u1 != u2 {
		t.Error("two addresses of one /64 have different keys")
	}
	if a3, _ := throttleKeys("2001:db9::1", "bob"); a3 == a1 {
		t.Error("another /64 shares the key")
	}
	if _, u4 := throttleKeys("2001:db8::1", "alice"); u4 == u1 {
		t.Error("another user shares the per-user key")
	}
	if a5, _ := throttleKeys("192.0.2.1", "bob"); a5 == func() string { a, _ := throttleKeys("192.0.2.2", "bob"); return a }() {
		t.Error("two IPv4 addresses share a key")
	}
	if k, _ := throttleKeys("::ffff:192.0.2.1", "x"); k != func() string { a, _ := throttleKeys("192.0.2.1", "x"); return a }() {
		t.Error("an IPv4-mapped address is not its IPv4 address")
	}
}
