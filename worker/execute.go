package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// A begun fire goes through its attempts without a goroutine of its own
// while it waits. Each attempt needs a concurrency slot: step takes a free
// one, or queues the fire in the limiter as a record (its turn) with its
// deadline, the task's timeout; the limiter starts it in a goroutine when
// a freed slot reaches it (slotted), or ends it when its deadline passes
// (noSlot). A retry's delay is a timer, not a sleeping goroutine. So the
// goroutines running fires are about as many as the node's slots, however
// many fires wait.

// step takes fire q, begun and needing a slot for its attempt q.attempt, as
// far as it goes without waiting. It returns q when it took a free slot for
// it (the caller holds the slot and runs q: runSlot), or nil when q waits in
// the node's queue or ended without a slot (recorded skipped). A fire that
// ended hands on to the fire queued behind it, which is taken the same way,
// so step may return that one instead.
func (r *runner) step(q *queuedFire) *queuedFire {
	for q != nil {
		var why string
		if q.spec.AtCapacity == protocol.AtCapacitySkip {
			if r.limit.tryAcquire() {
				return q
			}
			why = r.noSlotWhy(q, false, true)
		} else {
			r.watchStop()
			switch r.limit.join(&q.wait, q, time.Now().Add(time.Duration(q.spec.Timeout))) {
			case joinTaken:
				return q
			case joinQueued:
				return nil // q belongs to the queue now: slotted or noSlot
			}
			why = r.noSlotWhy(q, true, false)
		}
		q = r.attemptEnded(q, r.noSlotReport(q, why))
	}
	return nil
}

// slotted runs q, handed a slot at at by the limiter (turn).
func (q *queuedFire) slotted(at time.Time) { q.r.runSlot(q, at) }

// noSlot records q's attempt skipped: its wait for a slot ended (turn).
func (q *queuedFire) noSlot(stopped bool) {
	r := q.r
	if next := r.step(r.attemptEnded(q, r.noSlotReport(q, r.noSlotWhy(q, stopped, false)))); next != nil {
		go r.runSlot(next, time.Now())
	}
}

// runSlot runs q's attempt in the slot it holds (taken at at), then, on this
// goroutine, what follows while it finds a free slot: the fire queued
// behind q. A retry waits for its delay without it.
func (r *runner) runSlot(q *queuedFire, at time.Time) {
	for q != nil {
		rep := r.attempt(&q.spec, q.wf, q.fire, q.attempt, q.manual, q.cur, at, q.tmpl)
		q = r.step(r.attemptEnded(q, rep))
		at = time.Now()
	}
}

// attemptEnded records the report of q's attempt and decides what follows:
// a retry after its delay (nil is returned), or the end of the fire, which
// returns the fire queued behind it, begun and needing a slot, if any. A
// killed run is not retried, nor a fire that found no slot.
func (r *runner) attemptEnded(q *queuedFire, rep protocol.RunReport) *queuedFire {
	if c := q.catchUp; c != nil {
		rep.Covers = min(c.n, protocol.MaxCovers)
		rep.Output = protocol.CatchUpLine(c.n, c.first, c.last, c.more) + "\n" + rep.Output
	}
	r.reports.add(rep)
	if rep.Result.Retryable() && q.attempt <= q.spec.Retries && r.retryLater(q, r.backoff<<(q.attempt-1)) {
		return nil
	}
	return r.fireEnded(q)
}

// noSlotWhy is the output of an attempt that got no slot: the worker
// stopped (stopped, or its runs' context ended), the task skips at capacity
// (skip), or its wait lasted the task's whole timeout.
func (r *runner) noSlotWhy(q *queuedFire, stopped, skip bool) string {
	switch {
	case stopped || r.ctx.Err() != nil:
		return "skipped: the worker stopped before a concurrency slot was free"
	case skip:
		return "skipped: the node was at its max concurrency (at_capacity: skip)"
	}
	return fmt.Sprintf("skipped: the node was at its max concurrency for the whole timeout of %s", time.Duration(q.spec.Timeout))
}

// noSlotReport is the report of q's attempt that got no slot.
func (r *runner) noSlotReport(q *queuedFire, why string) protocol.RunReport {
	now := time.Now().UTC()
	return protocol.RunReport{ID: q.cur.String(), TaskID: q.spec.ID, Node: r.node(), ScheduledAt: q.fire, Attempt: q.attempt,
		Manual: q.manual, StartedAt: now, EndedAt: now, Result: protocol.ResultSkipped, Output: why, TaskVersion: q.spec.Version,
		WorkflowRun: q.wf.run(), WorkflowStep: q.wf.step()}
}

// retryWaits are the fires waiting for the delay before their next attempt,
// each with its timer.
type retryWaits struct {
	mu      sync.Mutex
	stopped bool
	timers  map[*queuedFire]*time.Timer
}

// retryLater starts q's next attempt after delay; false when the worker has
// stopped (the fire then ends, without another attempt).
func (r *runner) retryLater(q *queuedFire, delay time.Duration) bool {
	r.watchStop()
	w := &r.retrying
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || r.ctx.Err() != nil {
		return false
	}
	if w.timers == nil {
		w.timers = map[*queuedFire]*time.Timer{}
	}
	// The timer cannot fire before it is in the map: take needs the lock.
	w.timers[q] = time.AfterFunc(delay, func() {
		if w.take(q) {
			r.retry(q)
		}
	})
	return true
}

// take removes q's timer, which has fired; false if the worker's stop took
// it first.
func (w *retryWaits) take(q *queuedFire) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.timers[q]
	delete(w.timers, q)
	return ok
}

// stop refuses further retries and returns the fires waiting for one.
func (w *retryWaits) stop() []*queuedFire {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	qs := make([]*queuedFire, 0, len(w.timers))
	for q, t := range w.timers {
		t.Stop()
		qs = append(qs, q)
	}
	w.timers = nil
	return qs
}

// retry starts q's next attempt, its delay over.
func (r *runner) retry(q *queuedFire) {
	q.attempt++
	q.cur = r.newRunID()
	r.attemptStarted(q.spec.ID, q.cur)
	if q := r.step(q); q != nil {
		r.runSlot(q, time.Now())
	}
}

// watchStop arranges, once, that the end of the runs' context (the worker's
// stop, at the end of its drain) ends the fires that wait.
func (r *runner) watchStop() {
	r.stopWatch.Do(func() { context.AfterFunc(r.ctx, r.stopWaits) })
}

// stopWaits ends the fires waiting for a slot, each recorded skipped ("the
// worker stopped before a concurrency slot was free"), and those waiting
// for a retry's delay, without another attempt (the fires queued behind
// them are recorded skipped: stale).
func (r *runner) stopWaits() {
	r.limit.closeTurns()
	for _, q := range r.retrying.stop() {
		if next := r.step(r.fireEnded(q)); next != nil {
			go r.runSlot(next, time.Now())
		}
	}
}
