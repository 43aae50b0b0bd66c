package master

import (
	"database/sql"
	"testing"
	"time"
)

func TestClockSkewReasonAndVerdict(t *testing.T) {
	for skew, want := range map[time.Duration]string{
		0:                        "",
		time.Second:              "",
		-900 * time.Millisecond:  "",
		3200 * time.Millisecond:  "its clock is 3.2 s ahead of the master's",
		-2500 * time.Millisecond: "its clock is 2.5 s behind the master's",
		1001 * time.Millisecond:  "its clock is 1.0 s ahead of the master's",
	} {
		if got := ClockSkewReason(skew); got != want {
			t.Errorf("ClockSkewReason(%s) = %q, want %q", skew, got, want)
		}
		ms := skew.Milliseconds()
		if got := NodeClockSkewed(&Node{ClockSkewMS: sql.NullInt64{Int64: ms, Valid: true}}); got != (want != "") {
			t.Errorf("NodeClockSkewed(%d ms) = %v", ms, got)
		}
	}
	if NodeClockSkewed(&Node{}) {
		t.Error("a node never measured is flagged")
	}
	if _, known := NodeClockSkew(&Node{}); known {
		t.Error("a node never measured has a known skew")
	}
}
