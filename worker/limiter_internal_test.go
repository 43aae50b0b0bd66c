package worker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// queueUp starts n waiters on l one after another, each queued before the
// next starts, so their order is known; got(i) runs when waiter i holds a
// slot, and the waiter releases it after.
func queueUp(t testing.TB, l *limiter, n int, got func(i int)) *sync.WaitGroup {
	var wg sync.WaitGroup
	base := l.waiting()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !l.acquire(context.Background()) {
				panic("acquire without deadline failed")
			}
			got(i)
			l.release()
		}()
		deadline := time.Now().Add(10 * time.Second)
		for l.waiting() != base+i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(5 * time.Microsecond)
		}
	}
	return &wg
}

func TestLimiterHerdWakesOneWaiterPerSlotInOrder(t *testing.T) {
	const herd = 3000
	for _, slots := range []int{1, 7} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			l := newLimiter(slots)
			if got := l.tryAcquireN(slots); got != slots {
				t.Fatalf("took %d of %d free slots", got, slots)
			}
			// The waiters keep the slot they get: the test frees one slot
			// at a time (release is not tied to its holder) and sees who
			// got it, so the order is checked exactly.
			got := make(chan int, herd)
			var wg sync.WaitGroup
			for i := range herd {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if l.acquire(context.Background()) {
						got <- i
					}
				}()
				deadline := time.Now().Add(10 * time.Second)
				for l.waiting() != i+1 {
					if time.Now().After(deadline) {
						t.Fatalf("waiter %d never queued", i)
					}
					time.Sleep(5 * time.Microsecond)
				}
			}
			if l.wakes.Load() != 0 {
				t.Fatalf("%d wakes before any slot freed", l.wakes.Load())
			}
			for k := range herd {
				l.release()
				if i := <-got; i != k {
					t.Fatalf("slot %d went to waiter %d: order not kept", k, i)
				}
				if w := l.wakes.Load(); w != int64(k+1) {
					t.Fatalf("%d wakes after %d freed slots: want exactly one per slot", w, k+1)
				}
			}
			wg.Wait()
			if l.n != slots || l.waiting() != 0 {
				t.Fatalf("after the herd: %d slots held (want %d), %d waiting", l.n, slots, l.waiting())
			}
		})
	}
}

func TestLimiterNewcomersDoNotJumpTheQueue(t *testing.T) {
	l := newLimiter(2)
	l.tryAcquireN(2)
	got := make(chan int, 1)
	wg := queueUp(t, l, 1, func(i int) { got <- i })
	// A slot freed while someone waits goes to them, never to a newcomer.
	l.release()
	if <-got != 0 {
		t.Fatal("wrong waiter")
	}
	wg.Wait()
	// The queued waiter took the slot and gave it back: one slot held (ours).
	if l.n != 1 {
		t.Fatalf("%d slots held, want 1", l.n)
	}
	// Now a waiter queues while a slot is still held elsewhere; tryAcquire
	// must refuse even after setMax frees room only if the waiter is served first.
	l.tryAcquire() // fill again: 2 held
	hold := make(chan struct{})
	wg = queueUp(t, l, 1, func(int) { <-hold })
	if l.tryAcquire() || l.tryAcquireN(5) != 0 {
		t.Fatal("a newcomer took a slot while a waiter queued")
	}
	l.setMax(3) // the new slot goes to the waiter
	deadline := time.Now().Add(5 * time.Second)
	for l.waiting() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("raising the limit did not serve the waiter")
		}
		time.Sleep(time.Millisecond)
	}
	if l.tryAcquire() {
		t.Fatal("took a slot beyond the limit")
	}
	close(hold)
	wg.Wait()
}

func TestLimiterNoStarvationUnderContinuousArrivals(t *testing.T) {
	// An early waiter is served after at most the waiters ahead of it, however
	// many keep arriving behind it.
	l := newLimiter(1)
	l.tryAcquire()
	var served atomic.Int64
	var firstAt atomic.Int64
	firstAt.Store(-1)
	wg := queueUp(t, l, 1, func(int) { firstAt.Store(served.Add(1)) })
	stop := make(chan struct{})
	var arrivals sync.WaitGroup
	for range 8 {
		arrivals.Add(1)
		go func() {
			defer arrivals.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				if l.acquire(ctx) {
					served.Add(1)
					l.release()
				}
				cancel()
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.waiting() < 3 { // arrivals queued behind the first
		if time.Now().After(deadline) {
			t.Fatal("arrivals never queued")
		}
		time.Sleep(time.Millisecond)
	}
	l.release()
	wg.Wait()
	close(stop)
	arrivals.Wait()
	if firstAt.Load() != 1 {
		t.Fatalf("the first waiter was served %d-th: passed over by later arrivals", firstAt.Load())
	}
}

func TestLimiterCancelledWaitersLeaveWithoutWakes(t *testing.T) {
	l := newLimiter(1)
	l.tryAcquire()
	// A deadline that passes: the waiter leaves the queue, nobody is woken.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if l.acquire(ctx) {
		t.Fatal("acquired a held slot")
	}
	if l.waiting() != 0 || l.wakes.Load() != 0 {
		t.Fatalf("after a timed-out wait: %d waiting, %d wakes", l.waiting(), l.wakes.Load())
	}
	// A herd where every other waiter is cancelled: the rest are served,
	// one wake each, and the slot count returns to zero.
	const herd = 2000
	ctxs := make([]context.CancelFunc, herd)
	var wg sync.WaitGroup
	var gotSlot, gaveUp atomic.Int64
	for i := range herd {
		c, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.acquire(c) {
				gotSlot.Add(1)
				l.release()
			} else {
				gaveUp.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.waiting() != herd {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d queued", l.waiting(), herd)
		}
		time.Sleep(time.Millisecond)
	}
	perm := rand.Perm(herd)
	for _, i := range perm[:herd/2] {
		ctxs[i]()
	}
	l.release() // races with the cancellations: a slot granted as its wait ends is passed on
	wg.Wait()
	for _, c := range ctxs {
		c()
	}
	if gotSlot.Load()+gaveUp.Load() != herd || gotSlot.Load() < herd/2 {
		t.Fatalf("%d got a slot, %d gave up, of %d (half cancelled)", gotSlot.Load(), gaveUp.Load(), herd)
	}
	if w := l.wakes.Load(); w < gotSlot.Load() || w > gotSlot.Load()+herd/2 {
		t.Fatalf("%d wakes for %d served: at most one per slot handed over", w, gotSlot.Load())
	}
	if l.n != 0 || l.waiting() != 0 {
		t.Fatalf("after the herd: %d slots held, %d waiting", l.n, l.waiting())
	}
}

func TestLimiterLoweredLimitDropsFreedSlots(t *testing.T) {
	l := newLimiter(3)
	l.tryAcquireN(3)
	l.setMax(1)
	got := make(chan struct{}, 1)
	wg := queueUp(t, l, 1, func(int) { got <- struct{}{} })
	l.release() // 2 held, limit 1: the slot goes away
	l.release() // 1 held
	if l.wakes.Load() != 0 || l.waiting() != 1 {
		t.Fatalf("a waiter was served above the lowered limit (%d wakes, %d waiting)", l.wakes.Load(), l.waiting())
	}
	l.release() // 0 held: the waiter gets it
	<-got
	wg.Wait()
}

// broadcastLimiter is the limiter this package had before: every waiter is
// woken (a shared channel closed) at each release. Kept for the benchmark's
// comparison only.
type broadcastLimiter struct {
	mu      sync.Mutex
	n, max  int
	waiting int
	wake    chan struct{}
	wakes   atomic.Int64 // waiters woken, counted as the FIFO limiter counts its wakes
}

func (l *broadcastLimiter) acquire(ctx context.Context) bool {
	for {
		l.mu.Lock()
		if l.n < l.max {
			l.n++
			l.mu.Unlock()
			return true
		}
		ch := l.wake
		l.waiting++
		l.mu.Unlock()
		select {
		case <-ch:
			l.wakes.Add(1)
		case <-ctx.Done():
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
		if ctx.Err() != nil {
			return false
		}
	}
}

func (l *broadcastLimiter) release() {
	l.mu.Lock()
	l.n--
	if l.waiting > 0 {
		close(l.wake)
		l.wake = make(chan struct{})
	}
	l.mu.Unlock()
}

// benchTurn is a queued run of BenchmarkLimiterHerd: it holds its slot for
// hold, then frees it.
type benchTurn struct {
	l    *limiter
	w    waiter
	hold time.Duration
	wg   *sync.WaitGroup
}

func (b *benchTurn) slotted(time.Time) {
	if b.hold > 0 {
		time.Sleep(b.hold)
	}
	b.l.release()
	b.wg.Done()
}

func (b *benchTurn) noSlot(bool) { b.wg.Done() }

// BenchmarkLimiterHerd drains a queue of waiters through 16 slots, each run
// holding its slot for hold (a short request; 1ms, as short sleeps round up
// to the poller's millisecond anyway): handoffs/s is the runs the
// node gets through, which must stay flat as the queue grows, and
// wakes/handoff the goroutines woken per freed slot. "fifo" waiters are
// goroutines blocked in acquire, "turns" are queued records (join), as the
// runner queues its fires, "broadcast" the limiter this package had before;
// goroutines/waiter is what the queue holds while it waits.
func BenchmarkLimiterHerd(b *testing.B) {
	const slots = 16
	for _, impl := range []string{"turns", "fifo", "broadcast"} {
		for _, hold := range []time.Duration{0, time.Millisecond} {
			for _, herd := range []int{1000, 30000} {
				b.Run(fmt.Sprintf("%s/hold=%s/waiters=%d", impl, hold, herd), func(b *testing.B) {
					var total time.Duration
					var wakes, parked int64
					for range b.N {
						var release func()
						var queued func() int
						var woken func() int64
						var wg sync.WaitGroup
						before := runtime.NumGoroutine()
						switch impl {
						case "turns":
							l := newLimiter(slots)
							l.tryAcquireN(slots)
							turns := make([]benchTurn, herd)
							far := time.Now().Add(time.Hour)
							for i := range turns {
								wg.Add(1)
								turns[i] = benchTurn{l: l, hold: hold, wg: &wg}
								l.join(&turns[i].w, &turns[i], far)
							}
							release, queued, woken = l.release, l.waiting, l.wakes.Load
						case "fifo", "broadcast":
							var acquire func() bool
							if impl == "fifo" {
								l := newLimiter(slots)
								l.tryAcquireN(slots)
								acquire = func() bool { return l.acquire(context.Background()) }
								release, queued, woken = l.release, l.waiting, l.wakes.Load
							} else {
								l := &broadcastLimiter{max: slots, n: slots, wake: make(chan struct{})}
								acquire = func() bool { return l.acquire(context.Background()) }
								release, woken = l.release, l.wakes.Load
								queued = func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.waiting }
							}
							for range herd {
								wg.Add(1)
								go func() {
									defer wg.Done()
									acquire()
									if hold > 0 {
										time.Sleep(hold)
									}
									release()
								}()
							}
						}
						for queued() < herd {
							time.Sleep(time.Millisecond)
						}
						parked += int64(max(0, runtime.NumGoroutine()-before))
						start := time.Now()
						for range slots {
							release()
						}
						wg.Wait()
						total += time.Since(start)
						wakes += woken()
					}
					b.ReportMetric(float64(b.N*herd)/total.Seconds(), "handoffs/s")
					b.ReportMetric(float64(wakes)/float64(b.N*herd), "wakes/handoff")
					b.ReportMetric(float64(parked)/float64(b.N*herd), "goroutines/waiter")
				})
			}
		}
	}
}

// A fire on a full node is recorded once, as one skipped run, whatever its
// retries: at once under at_capacity skip, after its timeout under wait.
func TestFireOnAFullNodeIsRecordedOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy, says string
	}{
		{protocol.AtCapacitySkip, "(at_capacity: skip)"},
		{protocol.AtCapacityWait, "for the whole timeout of 300ms"},
	} {
		t.Run(c.policy, func(t *testing.T) {
			t.Parallel()
			sink := &reportSink{}
			ctx, cancel := context.WithCancel(context.Background())
			rep := newReporter("", 0, testutil.Discard(), sink.post)
			go rep.run(ctx)
			r := &runner{
				log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(1),
				http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 10 * time.Millisecond,
			}
			r.limit.tryAcquire() // the node is full
			spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "t1", Title: "t", Type: protocol.TaskHTTP, Retries: 3,
				Timeout: protocol.Duration(300 * time.Millisecond), AtCapacity: c.policy,
				HTTP: &protocol.HTTPSpec{URL: "http://127.0.0.1:1/"}}, Executors: 1}
			start := time.Now()
			r.run(spec, start, false)
			took := time.Since(start)
			// run returns after the fire's last attempt; stopping the reporter
			// delivers every report it was given.
			cancel()
			<-rep.done
			runs := sink.all()
			if len(runs) != 1 || runs[0].Result != protocol.ResultSkipped || !strings.Contains(runs[0].Output, c.says) {
				t.Fatalf("reports %+v, want one skipped run saying %q", runs, c.says)
			}
			if c.policy == protocol.AtCapacityWait && took < 300*time.Millisecond {
				t.Fatalf("wait gave up after %s, before its timeout", took)
			}
			if r.limit.waiting() != 0 {
				t.Fatalf("%d waiters left in the queue", r.limit.waiting())
			}
		})
	}
}
