package worker

import (
	"context"
	"sync"
	"sync/atomic"
)

// limiter bounds concurrent runs on the node (--maxc); its limit can change
// when the master sends a new configuration.
//
// Runs that find the node full wait in a FIFO queue, and each freed slot is
// handed to exactly one waiter, the oldest: a release costs the same with
// ten waiters or thirty thousand (the previous limiter woke every waiter at
// each release, and under a herd its throughput fell twentyfold), no waiter
// is passed over by later ones, and a waiter whose deadline passes leaves the
// queue without waking anyone. While anyone waits, every slot is held (a
// freed one goes straight to the head), so tryAcquire never jumps the queue.
type limiter struct {
	mu         sync.Mutex
	n          int // slots held
	max        int
	head, tail *waiter
	queued     int

	// wakes counts the waiters handed a slot: one per freed slot at most.
	wakes atomic.Int64
}

// waiter is one acquirer in the queue; ready is closed when it is handed a
// slot (granted is then set, under the limiter's lock).
type waiter struct {
	ready      chan struct{}
	prev, next *waiter
	granted    bool
	queued     bool
}

func newLimiter(max int) *limiter { return &limiter{max: max} }

// setMax changes the limit; a higher one hands the new slots to waiters.
func (l *limiter) setMax(max int) {
	l.mu.Lock()
	l.max = max
	for l.n < l.max && l.head != nil {
		l.n++
		l.grantLocked()
	}
	l.mu.Unlock()
}

// acquire takes a slot, waiting in turn until ctx ends (its deadline is the
// run's wait). It reports whether it holds a slot.
func (l *limiter) acquire(ctx context.Context) bool {
	l.mu.Lock()
	if l.n < l.max && l.head == nil {
		l.n++
		l.mu.Unlock()
		return true
	}
	w := &waiter{ready: make(chan struct{})}
	l.pushLocked(w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		// Handed a slot as the wait ended: pass it on rather than run late.
		l.releaseLocked()
		return false
	}
	l.removeLocked(w)
	return false
}

// tryAcquireN takes up to n free slots, without waiting, and returns how many.
func (l *limiter) tryAcquireN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head != nil {
		return 0
	}
	k := max(0, min(n, l.max-l.n))
	l.n += k
	return k
}

// tryAcquire takes a slot if one is free and nobody waits for one.
func (l *limiter) tryAcquire() bool { return l.tryAcquireN(1) == 1 }

// release frees a slot: the oldest waiter gets it, if any.
func (l *limiter) release() {
	l.mu.Lock()
	l.releaseLocked()
	l.mu.Unlock()
}

func (l *limiter) releaseLocked() {
	if l.n > l.max || l.head == nil {
		l.n-- // above a lowered limit, the slot is gone
		return
	}
	l.grantLocked() // the slot changes hands: n stays
}

// waiting is the length of the queue.
func (l *limiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// grantLocked hands a held slot to the head of the queue.
func (l *limiter) grantLocked() {
	w := l.head
	l.removeLocked(w)
	w.granted = true
	l.wakes.Add(1)
	close(w.ready)
}

func (l *limiter) pushLocked(w *waiter) {
	w.queued = true
	w.prev = l.tail
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	l.queued++
}

func (l *limiter) removeLocked(w *waiter) {
	if !w.queued {
		return
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	l.queued--
}
