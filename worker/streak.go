package worker

import (
	"sync"
	"time"
)

// streak logs a condition that repeats (a fire whose claim reached no
// master, thousands a second when many tasks fire) once when it begins,
// again at most every streakReminder with the count so far, and once when it
// ends with the total: the log says what changed, not every occurrence.
type streak struct {
	mu     sync.Mutex
	n      int64     // occurrences since the streak began
	since  time.Time // when it began; zero: no streak
	logged time.Time // when it was last logged
}

// streakReminder is how often an ongoing streak is logged again.
const streakReminder = 5 * time.Minute

// hit counts an occurrence at now; log says whether to log it (the first of
// a streak, or the first after a reminder's interval), n the count so far.
func (s *streak) hit(now time.Time) (log bool, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		s.since = now
	}
	s.n++
	if s.logged.IsZero() || now.Sub(s.logged) >= streakReminder {
		s.logged = now
		return true, s.n
	}
	return false, s.n
}

// end ends a streak; ended says there was one, n its count and since its start.
func (s *streak) end() (ended bool, n int64, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return false, 0, time.Time{}
	}
	n, since = s.n, s.since
	s.n, s.since, s.logged = 0, time.Time{}, time.Time{}
	return true, n, since
}
