package worker

import (
	"testing"
	"time"
)

func TestStreakLogsOncePerChangeWithACount(t *testing.T) {
	var s streak
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	logged := 0
	for i := range 10000 {
		if log, _ := s.hit(t0.Add(time.Duration(i) * time.Millisecond)); log {
			logged++
		}
	}
	if logged != 1 {
		t.Fatalf("10,000 occurrences in 10 s logged %d times, want once", logged)
	}
	// A long streak is recalled every streakReminder, with its count.
	if log, n := s.hit(t0.Add(streakReminder + time.Second)); !log || n != 10001 {
		t.Fatalf("after %s: log %v count %d, want a reminder counting 10001", streakReminder, log, n)
	}
	ended, n, since := s.end()
	if !ended || n != 10001 || !since.Equal(t0) {
		t.Fatalf("end: %v %d %s", ended, n, since)
	}
	if ended, _, _ := s.end(); ended {
		t.Fatal("a streak ended twice")
	}
	if log, n := s.hit(t0.Add(time.Hour)); !log || n != 1 {
		t.Fatalf("a new streak: log %v count %d, want logged, 1", log, n)
	}
}
