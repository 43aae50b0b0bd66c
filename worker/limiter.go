package worker

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
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
//
// A waiter is either a goroutine blocked in acquire or a turn (join): a run
// queued as a record, without a goroutine of its own, which gets one when
// it is handed its slot. A herd of 100,000 runs then waits as 100,000
// records rather than as many parked goroutines (each with its stack, its
// context and its timer): the turns' deadlines are kept in a heap, earliest
// first, under a single timer.
type limiter struct {
	mu         sync.Mutex
	n          int // slots held
	max        int
	head, tail *waiter
	queued     int
	// closed refuses new turns: the worker stopped (closeTurns).
	closed bool

	// deadlines holds the queued turns, earliest deadline first; timer
	// fires at timerAt (zero: not armed), no later than the earliest.
	deadlines byDeadline
	timer     *time.Timer
	timerAt   time.Time

	// wakes counts the waiters handed a slot: one per freed slot at most.
	wakes atomic.Int64
}

// waiter is one place in the queue. A blocking acquirer's ready is closed
// when it is handed a slot (granted is then set, under the limiter's lock);
// a turn's slotted method is started in a goroutine of its own.
type waiter struct {
	ready      chan struct{}
	turn       turn      // nil for a blocking acquirer
	deadline   time.Time // a turn's: when it gives up waiting
	index      int       // a queued turn's place in the limiter's deadlines
	prev, next *waiter
	granted    bool
	queued     bool
}

// turn is a run waiting in the limiter's queue as a record.
type turn interface {
	// slotted runs, in a goroutine of its own, a turn handed a slot (at
	// is when); the turn releases the slot when its attempt ends.
	slotted(at time.Time)
	// noSlot ends a turn that left the queue without a slot: its deadline
	// passed, or (stopped) the queue was closed. It must not block for
	// long: the turns that expire together are ended one after another.
	noSlot(stopped bool)
}

// joined says what join did with a turn.
type joined int

const (
	joinTaken  joined = iota // a free slot was taken for it: the caller runs it now
	joinQueued               // it waits in the queue
	joinClosed               // refused: the queue is closed
)

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
// run's wait). It reports whether it holds a slot. The caller's goroutine
// waits here: the runner queues its fires as turns instead (join).
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

// join takes a free slot for t if nobody waits (joinTaken: the caller holds
// it and runs t), else queues t in w until deadline (joinQueued: t.slotted
// or t.noSlot is called later, from another goroutine). A closed queue
// refuses it (joinClosed). w must not be in the queue already.
func (l *limiter) join(w *waiter, t turn, deadline time.Time) joined {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n < l.max && l.head == nil {
		l.n++
		return joinTaken
	}
	if l.closed {
		return joinClosed
	}
	w.turn, w.deadline, w.granted, w.ready = t, deadline, false, nil
	l.pushLocked(w)
	heap.Push(&l.deadlines, w)
	if l.timerAt.IsZero() || deadline.Before(l.timerAt) {
		l.armLocked(deadline)
	}
	return joinQueued
}

// armLocked sets the timer to fire at at.
func (l *limiter) armLocked(at time.Time) {
	l.timerAt = at
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(at), l.expire)
		return
	}
	l.timer.Reset(time.Until(at))
}

// expire ends the turns whose deadline has passed, and sets the timer for
// the next deadline. A turn handed its slot left the heap then: the timer
// may fire for nothing (it is not moved when the earliest turn leaves).
func (l *limiter) expire() {
	l.mu.Lock()
	l.timerAt = time.Time{}
	now := time.Now()
	var ended turnList
	for len(l.deadlines) > 0 && !l.deadlines[0].deadline.After(now) {
		w := l.deadlines[0]
		l.removeLocked(w)
		ended.push(w)
	}
	if len(l.deadlines) > 0 && !l.closed {
		l.armLocked(l.deadlines[0].deadline)
	}
	l.mu.Unlock()
	endTurns(ended.first, false)
}

// turnList collects the turns taken out of the queue under the lock, in
// order, linked by next, to be ended after it (endTurns).
type turnList struct{ first, last *waiter }

func (t *turnList) push(w *waiter) {
	if t.last == nil {
		t.first = w
	} else {
		t.last.next = w
	}
	t.last = w
}

// endTurns calls noSlot on a list of turns linked by next, in order.
func endTurns(w *waiter, stopped bool) {
	for w != nil {
		next := w.next
		w.next = nil
		w.turn.noSlot(stopped) // may reuse w
		w = next
	}
}

// closeTurns refuses turns from now on and ends the queued ones, in their
// order, as stopped. Blocking acquirers stay queued.
func (l *limiter) closeTurns() {
	l.mu.Lock()
	l.closed = true
	var ended turnList
	for w := l.head; w != nil; {
		next := w.next
		if w.turn != nil {
			l.removeLocked(w)
			ended.push(w)
		}
		w = next
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timerAt = time.Time{}
	}
	l.mu.Unlock()
	endTurns(ended.first, true)
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

// held is how many slots runs hold now.
func (l *limiter) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// waiting is the length of the queue.
func (l *limiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// grantLocked hands a held slot to the head of the queue: a blocking
// acquirer is woken, a turn is started in a goroutine of its own (so the
// turns running are never more than the slots).
func (l *limiter) grantLocked() {
	w := l.head
	l.removeLocked(w)
	w.granted = true
	l.wakes.Add(1)
	if t := w.turn; t != nil {
		go t.slotted(time.Now())
		return
	}
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
	if w.turn != nil {
		heap.Remove(&l.deadlines, w.index)
		if len(l.deadlines) == 0 && cap(l.deadlines) > 1024 {
			l.deadlines = nil // a herd's heap is not kept once it has drained
		}
	}
}

// byDeadline is a heap of queued turns, earliest deadline first.
type byDeadline []*waiter

func (h byDeadline) Len() int           { return len(h) }
func (h byDeadline) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h byDeadline) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

// Push adds a turn (heap.Interface).
func (h *byDeadline) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}

// Pop removes the last turn (heap.Interface).
func (h *byDeadline) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
