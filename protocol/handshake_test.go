package protocol_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

const clusterKey = "test-cluster-key-0123456789abcdef"

func TestCheckTimestamp(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		ts string
		ok bool
	}{
		{strconv.FormatInt(now.Unix(), 10), true},
		{strconv.FormatInt(now.Add(-5*time.Minute).Unix(), 10), true},
		{strconv.FormatInt(now.Add(5*time.Minute).Unix(), 10), true},
		{strconv.FormatInt(now.Add(-5*time.Minute-time.Second).Unix(), 10), false},
		{strconv.FormatInt(now.Add(5*time.Minute+time.Second).Unix(), 10), false},
		{"", false},
		{"1e9", false},
		{"-1", false},
	} {
		err := protocol.CheckTimestamp(c.ts, now)
		if (err == nil) != c.ok {
			t.Errorf("CheckTimestamp(%q) = %v, want ok=%v", c.ts, err, c.ok)
		}
		if err != nil && !errors.Is(err, protocol.ErrHandshake) {
			t.Errorf("CheckTimestamp(%q) error %v is not ErrHandshake", c.ts, err)
		}
	}
}

func TestMACHelpers(t *testing.T) {
	t.Parallel()
	a := protocol.RegisterMAC(clusterKey, "w1", "1", "n", []byte(`{"a":1}`))
	if a == protocol.RegisterMAC(clusterKey, "w1", "1", "n", []byte(`{"a":2}`)) {
		t.Error("RegisterMAC does not cover the body")
	}
	if a == protocol.RegisterMAC("other", "w1", "1", "n", []byte(`{"a":1}`)) {
		t.Error("RegisterMAC does not depend on the key")
	}
	if !protocol.EqualMAC(a, a) || protocol.EqualMAC(a, a[:len(a)-2]) || protocol.EqualMAC("zz", "zz") {
		t.Error("EqualMAC wrong")
	}
	// The fields are separated: moving a character between them changes the MAC.
	if protocol.ConnectMAC(clusterKey, "ab", "c", "1", "n") == protocol.ConnectMAC(clusterKey, "a", "bc", "1", "n") {
		t.Error("ConnectMAC fields are not separated")
	}
	if protocol.EqualSecret("", "") || !protocol.EqualSecret("x", "x") || protocol.EqualSecret("x", "y") {
		t.Error("EqualSecret wrong")
	}
	if s1, s2 := protocol.NewSecret(), protocol.NewSecret(); s1 == s2 || len(s1) != 64 {
		t.Errorf("NewSecret: %q %q", s1, s2)
	}
}
