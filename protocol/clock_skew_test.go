package protocol_test

import (
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func TestClockSkewHalvesTheRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name           string
		node           time.Time
		sent, received time.Time
		want           time.Duration
	}{
		{"in step, read at the midpoint", t0.Add(100 * time.Millisecond), t0, t0.Add(200 * time.Millisecond), 0},
		{"3 s ahead over a 400 ms round trip", t0.Add(3200 * time.Millisecond), t0, t0.Add(400 * time.Millisecond), 3 * time.Second},
		{"2 s behind", t0.Add(-1900 * time.Millisecond), t0, t0.Add(200 * time.Millisecond), -2 * time.Second},
		{"registration: no round trip", t0.Add(1500 * time.Millisecond), t0, t0, 1500 * time.Millisecond},
	} {
		if got := protocol.ClockSkew(c.node, c.sent, c.received); got != c.want {
			t.Errorf("%s: ClockSkew = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestClockSkewedBeyondOneSecondEitherWay(t *testing.T) {
	for skew, want := range map[time.Duration]bool{
		0: false, time.Second: false, -time.Second: false, 999 * time.Millisecond: false,
		time.Second + time.Millisecond: true, -time.Second - time.Millisecond: true,
		3200 * time.Millisecond: true, -2 * time.Second: true,
	} {
		if got := protocol.ClockSkewed(skew); got != want {
			t.Errorf("ClockSkewed(%s) = %v, want %v", skew, got, want)
		}
	}
}
