package worker

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// OffsetClock is a clock the given offset ahead of the real one (behind
// when negative), for Config.Now: a test plays a machine whose clock is
// off with it.
func OffsetClock(offset time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(offset) }
}

// now is this worker's clock (Config.Now, else the real one).
func (w *Worker) now() time.Time {
	if w.cfg.Now != nil {
		return w.cfg.Now()
	}
	return time.Now()
}

// schedClock is the worker's clock as gocron reads it: the time of day is
// Config.Now's; waits, timers and tickers are the real clock's (an offset
// clock moves at the real one's pace).
type schedClock struct {
	clockwork.Clock
	now func() time.Time
}

func (c schedClock) Now() time.Time                  { return c.now() }
func (c schedClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }
func (c schedClock) Until(t time.Time) time.Duration { return t.Sub(c.now()) }
