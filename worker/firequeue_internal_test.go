package worker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// The tests here count goroutines (runtime.NumGoroutine): they do not call
// t.Parallel, so only what earlier tests left behind runs beside them, and
// their bounds (a few dozen) sit far below the one goroutine per waiting
// run they rule out (tens of thousands).

// turnEnd is what happened to a testTurn that got no slot.
type turnEnd struct {
	i       int
	stopped bool
	at      time.Time
}

// testTurn is a turn that tells on channels what happened to it; handed a
// slot, it keeps it (the test frees slots one at a time and sees who got
// each).
type testTurn struct {
	i     int
	w     waiter
	got   chan<- int
	ended chan<- turnEnd
}

func (tt *testTurn) slotted(time.Time) { tt.got <- tt.i }

func (tt *testTurn) noSlot(stopped bool) {
	tt.ended <- turnEnd{i: tt.i, stopped: stopped, at: time.Now()}
}

// goroutinesSince is how many more goroutines run now than before.
func goroutinesSince(before int) int { return runtime.NumGoroutine() - before }

// fewGoroutines bounds the goroutines a queue of waiters may add, as a
// rate per waiter: a quarter of a goroutine each, so one per waiter (the
// design this guards against) fails by four times, while the goroutines the
// runtime, the race detector, HTTP connections and the reporter start on
// their own (CI saw 15 under load, and more with more connections) never
// come near it.
func fewGoroutines(waiters int) int { return waiters / 4 }

func TestLimiterQueuedTurnsHoldNoGoroutineAndStartOnePerFreedSlot(t *testing.T) {
	const herd, slots = 50_000, 8
	l := newLimiter(slots)
	if got := l.tryAcquireN(slots); got != slots {
		t.Fatalf("took %d of %d free slots", got, slots)
	}
	got := make(chan int, herd)
	ended := make(chan turnEnd, herd)
	turns := make([]testTurn, herd)
	before := runtime.NumGoroutine()
	deadline := time.Now().Add(time.Hour)
	for i := range turns {
		turns[i] = testTurn{i: i, got: got, ended: ended}
		if j := l.join(&turns[i].w, &turns[i], deadline); j != joinQueued {
			t.Fatalf("turn %d on a full node: join = %d, want queued", i, j)
		}
	}
	if n := goroutinesSince(before); n > fewGoroutines(herd) {
		t.Fatalf("a queue of %d turns holds %d more goroutines", herd, n)
	}
	if l.waiting() != herd || len(l.deadlines) != herd {
		t.Fatalf("%d waiting, %d deadlines; want %d", l.waiting(), len(l.deadlines), herd)
	}
	if l.tryAcquire() {
		t.Fatal("a newcomer took a slot while turns waited")
	}
	peak := 0
	for k := range herd {
		l.release()
		if i := <-got; i != k {
			t.Fatalf("slot %d went to turn %d: order not kept", k, i)
		}
		if w := l.wakes.Load(); w != int64(k+1) {
			t.Fatalf("%d turns started after %d freed slots: want exactly one per slot", w, k+1)
		}
		if k%1000 == 0 {
			peak = max(peak, goroutinesSince(before))
		}
	}
	// Each started turn holds its goroutine only while it runs: the peak is
	// about the slots (8), where turns that kept theirs would be thousands;
	// the bound is a rate per turn drained, not an allowance.
	if peak > herd/100 {
		t.Fatalf("up to %d more goroutines while the queue drained through %d slots", peak, slots)
	}
	if l.n != slots || l.waiting() != 0 || len(l.deadlines) != 0 || len(ended) != 0 {
		t.Fatalf("after the herd: %d slots held (want %d), %d waiting, %d deadlines, %d ended without a slot",
			l.n, slots, l.waiting(), len(l.deadlines), len(ended))
	}
}

func TestLimiterTurnDeadlinesExpireOnceWithoutAGoroutineEach(t *testing.T) {
	const herd = 3200
	l := newLimiter(1)
	l.tryAcquire()
	got := make(chan int, herd)
	ended := make(chan turnEnd, herd)
	turns := make([]testTurn, herd)
	deadlines := make([]time.Time, herd)
	isLong := make([]bool, herd)
	before := runtime.NumGoroutine()
	// Short waits (20 to 400ms, in no order) interleaved with long ones
	// (every 16th), which stay queued and are served after.
	nLong := 0
	for i := range turns {
		turns[i] = testTurn{i: i, got: got, ended: ended}
		wait := time.Duration(20+rand.IntN(380)) * time.Millisecond
		if i%16 == 0 {
			wait, isLong[i] = time.Hour, true
			nLong++
		}
		deadlines[i] = time.Now().Add(wait)
		if l.join(&turns[i].w, &turns[i], deadlines[i]) != joinQueued {
			t.Fatalf("turn %d not queued", i)
		}
	}
	seen := make([]bool, len(turns))
	peak := 0
	for n := 0; n < len(turns)-nLong; n++ {
		var e turnEnd
		select {
		case e = <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d short waits ended", n, len(turns)-nLong)
		}
		switch {
		case seen[e.i]:
			t.Fatalf("turn %d ended twice", e.i)
		case isLong[e.i]:
			t.Fatalf("turn %d ended before its deadline of an hour", e.i)
		case e.stopped:
			t.Fatalf("turn %d ended as stopped", e.i)
		case e.at.Before(deadlines[e.i]):
			t.Fatalf("turn %d ended %s before its deadline", e.i, deadlines[e.i].Sub(e.at))
		}
		seen[e.i] = true
		peak = max(peak, goroutinesSince(before))
	}
	if peak > fewGoroutines(len(turns)-nLong) {
		t.Fatalf("up to %d more goroutines while %d waits expired: one per waiter?", peak, len(turns)-nLong)
	}
	if l.waiting() != nLong || l.wakes.Load() != 0 || len(l.deadlines) != nLong {
		t.Fatalf("after the short waits: %d waiting, %d deadlines (want %d), %d wakes", l.waiting(), len(l.deadlines), nLong, l.wakes.Load())
	}
	// The long ones are served in their order, one per freed slot.
	prev := -1
	for k := range nLong {
		l.release()
		i := <-got
		if !isLong[i] || i <= prev {
			t.Fatalf("slot %d went to turn %d (after %d): not the oldest long wait", k, i, prev)
		}
		prev = i
	}
	if l.wakes.Load() != int64(nLong) || l.waiting() != 0 || len(ended) != 0 {
		t.Fatalf("%d wakes for %d served, %d waiting, %d more ended", l.wakes.Load(), nLong, l.waiting(), len(ended))
	}
}

func TestLimiterSetMaxStartsAndDropsTurnSlots(t *testing.T) {
	l := newLimiter(2)
	l.tryAcquireN(2)
	got := make(chan int, 10)
	ended := make(chan turnEnd, 10)
	turns := make([]testTurn, 10)
	for i := range turns {
		turns[i] = testTurn{i: i, got: got, ended: ended}
		l.join(&turns[i].w, &turns[i], time.Now().Add(time.Hour))
	}
	l.setMax(5) // three new slots: the three oldest turns (started together)
	started := map[int]bool{}
	for range 3 {
		started[<-got] = true
	}
	if !started[0] || !started[1] || !started[2] {
		t.Fatalf("the new slots went to turns %v, want 0, 1 and 2", started)
	}
	if l.wakes.Load() != 3 || l.waiting() != 7 || l.n != 5 {
		t.Fatalf("after raising the limit: %d wakes, %d waiting, %d held", l.wakes.Load(), l.waiting(), l.n)
	}
	l.setMax(1)
	for range 4 {
		l.release() // above the lowered limit: the slot is gone
	}
	if l.wakes.Load() != 3 || l.waiting() != 7 || l.n != 1 {
		t.Fatalf("a turn started above the lowered limit: %d wakes, %d waiting, %d held", l.wakes.Load(), l.waiting(), l.n)
	}
	l.release() // within the limit: the next turn
	if i := <-got; i != 3 {
		t.Fatalf("the freed slot went to turn %d, want 3", i)
	}
	if l.wakes.Load() != 4 || l.waiting() != 6 {
		t.Fatalf("%d wakes, %d waiting", l.wakes.Load(), l.waiting())
	}
}

func TestLimiterCloseEndsTurnsInOrder(t *testing.T) {
	l := newLimiter(1)
	l.tryAcquire()
	got := make(chan int, 10)
	ended := make(chan turnEnd, 10)
	turns := make([]testTurn, 10)
	for i := range turns[:5] {
		turns[i] = testTurn{i: i, got: got, ended: ended}
		l.join(&turns[i].w, &turns[i], time.Now().Add(time.Hour))
	}
	// A blocking acquirer among them stays queued: only turns are ended.
	acquired := make(chan bool, 1)
	go func() { acquired <- l.acquire(context.Background()) }()
	testutil.Eventually(t, 5*time.Second, func() bool { return l.waiting() == 6 }, "the acquirer never queued")
	for i := 5; i < 10; i++ {
		turns[i] = testTurn{i: i, got: got, ended: ended}
		l.join(&turns[i].w, &turns[i], time.Now().Add(time.Hour))
	}
	l.closeTurns()
	for k := range 10 {
		if e := <-ended; e.i != k || !e.stopped {
			t.Fatalf("ended %d-th: turn %d (stopped %v), want turn %d stopped", k, e.i, e.stopped, k)
		}
	}
	if l.waiting() != 1 || len(l.deadlines) != 0 {
		t.Fatalf("after closing: %d waiting (want the acquirer), %d deadlines", l.waiting(), len(l.deadlines))
	}
	late := testTurn{i: 99, got: got, ended: ended}
	if j := l.join(&late.w, &late, time.Now().Add(time.Hour)); j != joinClosed {
		t.Fatalf("a turn on a closed, full queue: join = %d", j)
	}
	l.release()
	if !<-acquired {
		t.Fatal("the blocking acquirer did not get the freed slot")
	}
	if len(got) != 0 || l.wakes.Load() != 1 {
		t.Fatalf("%d turns started after closing, %d wakes", len(got), l.wakes.Load())
	}
}

// queueRunner is a real runner and reporter (journal in a temp dir: no
// report is lost however many come at once) whose HTTP client keeps no
// connection (no goroutine stays for one). stop cancels its runs' context,
// as the end of a worker's drain does; the reporter delivers on until the
// test ends.
func queueRunner(t *testing.T, slots int) (r *runner, sink *reportSink, stop context.CancelFunc) {
	t.Helper()
	sink = &reportSink{}
	repCtx, repCancel := context.WithCancel(context.Background())
	rep := newReporter(t.TempDir(), 0, testutil.Discard(), sink.post)
	go rep.run(repCtx)
	ctx, stop := context.WithCancel(context.Background())
	r = &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(slots),
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, jobs: map[string]*taskJob{}, ctx: ctx,
		reports: rep, backoff: 100 * time.Millisecond,
	}
	t.Cleanup(func() {
		stop()
		repCancel()
		<-rep.done
	})
	return r, sink, stop
}

func queueSpec(id, url string, timeout time.Duration) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: id, Type: protocol.TaskHTTP, Timeout: protocol.Duration(timeout),
		HTTP: &protocol.HTTPSpec{URL: url}}, Executors: 1}
}

// waitReports waits until the sink holds n reports and returns them.
func waitReports(t *testing.T, sink *reportSink, n int, within time.Duration) []protocol.RunReport {
	t.Helper()
	testutil.Eventually(t, within, func() bool { return len(sink.all()) >= n }, "want %d reports", n)
	return sink.all()
}

// 50,000 fires waiting for a slot are records, not goroutines; each wait
// that lasts its task's whole timeout is recorded once, skipped, with the
// output a waiting goroutine used to write, and none is retried. The
// goroutines are measured against a baseline in the same test: the same
// herd of 500 fires, whose count already has the runtime's, the race
// detector's and the reporter's own (a few dozen under load). 49,500 more
// waiters may add far less than one goroutine per hundred of them, where
// one per waiter would add 49,500.
func TestQueuedFiresHoldNoGoroutineAndExpireOnce(t *testing.T) {
	const small, herd = 500, 50_000
	smallHeld, smallPeak := queuedHerd(t, small)
	held, peak := queuedHerd(t, herd)
	t.Logf("goroutines added: %d waiting, up to %d while the waits ended (%d waiters); %d and %d (%d waiters)",
		smallHeld, smallPeak, small, held, peak, herd)
	if bound := (herd - small) / 100; held-smallHeld >= bound || peak-smallPeak >= bound {
		t.Fatalf("%d more waiters added %d more goroutines waiting and %d more while the waits ended: one per waiter?",
			herd-small, held-smallHeld, peak-smallPeak)
	}
}

// queuedHerd queues herd fires on a full node, checks that each wait ends
// once, skipped when its timeout passes, and returns the goroutines the
// queued fires added (held) and the most they added while their waits
// ended (peak).
func queuedHerd(t *testing.T, herd int) (held, peak int) {
	t.Helper()
	const slots = 8
	r, sink, _ := queueRunner(t, slots)
	r.limit.tryAcquireN(slots) // the node is full
	spec := queueSpec("t", "http://127.0.0.1:1/", 1500*time.Millisecond)
	spec.Retries = 2
	before := runtime.NumGoroutine()
	var done sync.WaitGroup
	fire := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for i := range herd {
		done.Add(1)
		r.runQueued(r.newQueuedFire(&spec, fire.Add(time.Duration(i)*time.Second), false, r.newRunID(), nil), &done)
	}
	held = goroutinesSince(before)
	if r.limit.waiting() != herd || r.active.count() != herd {
		t.Fatalf("%d waiting, %d active; want %d", r.limit.waiting(), r.active.count(), herd)
	}
	ended := make(chan struct{})
	go func() { done.Wait(); close(ended) }()
	for waiting := true; waiting; {
		select {
		case <-ended:
			waiting = false
		case <-time.After(5 * time.Millisecond):
			peak = max(peak, goroutinesSince(before))
		}
	}
	runs := waitReports(t, sink, herd, 60*time.Second)
	ids := map[string]bool{}
	for _, rep := range runs {
		if rep.Result != protocol.ResultSkipped || rep.Attempt != 1 ||
			rep.Output != "skipped: the node was at its max concurrency for the whole timeout of 1.5s" {
			t.Fatalf("report %+v", rep)
		}
		if ids[rep.ID] {
			t.Fatalf("fire %s recorded twice", rep.ID)
		}
		ids[rep.ID] = true
	}
	if len(runs) != herd || r.limit.waiting() != 0 || r.active.count() != 0 || r.limit.wakes.Load() != 0 || r.limit.n != slots {
		t.Fatalf("%d reports, %d waiting, %d active, %d wakes, %d slots held", len(runs), r.limit.waiting(), r.active.count(),
			r.limit.wakes.Load(), r.limit.n)
	}
	return held, peak
}

// orderTarget records the paths of the requests it gets, in order.
// fail says which paths answer 500; hold, when not nil, holds every answer
// until it is closed.
func orderTarget(t *testing.T, fail func(path string) bool, hold <-chan struct{}) (url string, paths func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got = append(got, req.URL.Path)
		mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
			}
		}
		if fail != nil && fail(req.URL.Path) {
			rw.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// Queued fires run in their order, each freed slot starting exactly one;
// each run's report keeps its scheduled time, and its start is when it got
// its slot.
func TestQueuedFiresRunInOrderOneStartPerFreedSlot(t *testing.T) {
	const n = 300
	url, paths := orderTarget(t, nil, nil)
	r, sink, _ := queueRunner(t, 1)
	r.limit.tryAcquire()
	var done sync.WaitGroup
	fire := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for i := range n {
		spec := queueSpec(fmt.Sprintf("t%03d", i), fmt.Sprintf("%s/f/%03d", url, i), time.Minute)
		done.Add(1)
		r.runQueued(r.newQueuedFire(&spec, fire.Add(time.Duration(i)*time.Minute), false, r.newRunID(), nil), &done)
	}
	freed := time.Now().Round(0) // wall clock, as the reports'
	r.limit.release()
	done.Wait()
	got := paths()
	for i, p := range got {
		if want := fmt.Sprintf("/f/%03d", i); p != want {
			t.Fatalf("request %d was %s, want %s: order not kept", i, p, want)
		}
	}
	if len(got) != n || r.limit.wakes.Load() != n {
		t.Fatalf("%d requests, %d slots handed over; want %d each", len(got), r.limit.wakes.Load(), n)
	}
	runs := waitReports(t, sink, n, 10*time.Second)
	byFire := make([]*protocol.RunReport, n)
	for k, rep := range runs {
		var i int
		if _, err := fmt.Sscanf(rep.TaskID, "t%03d", &i); err != nil || rep.Result != protocol.ResultSuccess || byFire[i] != nil {
			t.Fatalf("report %+v", rep)
		}
		if !rep.ScheduledAt.Equal(fire.Add(time.Duration(i) * time.Minute)) {
			t.Fatalf("fire %d scheduled at %s", i, rep.ScheduledAt)
		}
		byFire[i] = &runs[k]
	}
	prev := freed
	for i, rep := range byFire {
		if rep.StartedAt.Before(prev) || rep.EndedAt.Before(rep.StartedAt) {
			t.Fatalf("fire %d started %s, before the previous one (%s)", i, rep.StartedAt, prev)
		}
		prev = rep.StartedAt
	}
	if r.active.count() != 0 || r.limit.n != 0 {
		t.Fatalf("%d active, %d slots held", r.active.count(), r.limit.n)
	}
}

// A retry waits for its delay on a timer, then for a slot at the back of
// the queue like any fire: 500 fires in their retry delay hold no
// goroutine, and a retry never jumps the fires queued before it.
func TestRetriesWaitWithoutGoroutinesAndQueueInTurn(t *testing.T) {
	const n, slots = 500, 8
	url, paths := orderTarget(t, func(p string) bool { return strings.HasPrefix(p, "/fail/") }, nil)
	r, sink, _ := queueRunner(t, slots)
	r.backoff = 3 * time.Second // far longer than the first attempts take
	before := runtime.NumGoroutine()
	for i := range n {
		spec := queueSpec(fmt.Sprintf("f%04d", i), fmt.Sprintf("%s/fail/%04d", url, i), time.Minute)
		spec.Retries = 1
		r.runQueued(r.newQueuedFire(&spec, time.Now(), false, r.newRunID(), nil), nil)
	}
	// Every first attempt fails; the fires then wait for their retry.
	delayed := func() int {
		r.retrying.mu.Lock()
		defer r.retrying.mu.Unlock()
		return len(r.retrying.timers)
	}
	testutil.Eventually(t, 30*time.Second, func() bool { return delayed() == n }, "the fires never all waited for their retry")
	if g := goroutinesSince(before); g > fewGoroutines(n) {
		t.Fatalf("%d fires in their retry delay hold %d more goroutines", n, g)
	}
	// One slot, held: fires queued now come before the retries.
	r.limit.setMax(1)
	if !r.limit.tryAcquire() {
		t.Fatal("the node's slot is not free")
	}
	for i := range 3 {
		spec := queueSpec(fmt.Sprintf("x%d", i), fmt.Sprintf("%s/x/%d", url, i), time.Minute)
		r.runQueued(r.newQueuedFire(&spec, time.Now(), false, r.newRunID(), nil), nil)
	}
	testutil.Eventually(t, 30*time.Second, func() bool { return r.limit.waiting() == n+3 }, "the retries never queued")
	if g := goroutinesSince(before); g > fewGoroutines(n) {
		t.Fatalf("%d queued retries hold %d more goroutines", n, g)
	}
	r.limit.release()
	runs := waitReports(t, sink, 2*n+3, 60*time.Second)
	got := paths()[n:]
	for i, p := range got[:3] {
		if want := fmt.Sprintf("/x/%d", i); p != want {
			t.Fatalf("after the first attempts, request %d was %s, want %s: a retry jumped the queue", i, p, want)
		}
	}
	second := 0
	for _, rep := range runs {
		if strings.HasPrefix(rep.TaskID, "f") && rep.Attempt == 2 {
			second++
		}
	}
	if second != n || r.active.count() != 0 {
		t.Fatalf("%d second attempts (want %d), %d active", second, n, r.active.count())
	}
}

// The worker's stop (its runs' context ends) records every fire waiting for
// a slot as skipped once, ends the fires waiting for a retry without
// another attempt, and refuses later fires at once.
func TestStopEndsQueuedAndDelayedFires(t *testing.T) {
	const n, slots = 10_000, 2
	url, _ := orderTarget(t, func(p string) bool { return p == "/retry" }, nil)
	r, sink, stop := queueRunner(t, slots)
	r.backoff = time.Hour
	retried := queueSpec("retry", url+"/retry", time.Minute)
	retried.Retries = 3
	var retryDone sync.WaitGroup
	retryDone.Add(1)
	r.runQueued(r.newQueuedFire(&retried, time.Now(), false, r.newRunID(), nil), &retryDone)
	testutil.Eventually(t, 10*time.Second, func() bool { return len(sink.all()) == 1 }, "the first attempt")
	r.limit.tryAcquireN(slots)
	spec := queueSpec("t", url+"/t", time.Hour)
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		r.runQueued(r.newQueuedFire(&spec, time.Now(), false, r.newRunID(), nil), &done)
	}
	if r.limit.waiting() != n || r.active.count() != n+1 {
		t.Fatalf("%d waiting, %d active", r.limit.waiting(), r.active.count())
	}
	stop()
	done.Wait()
	retryDone.Wait()
	testutil.Eventually(t, 10*time.Second, func() bool { return r.active.count() == 0 }, "fires still active after the stop")
	// Later fires get no slot, whatever their policy, and say why at once.
	skip := queueSpec("s", url+"/s", time.Hour)
	skip.AtCapacity = protocol.AtCapacitySkip
	r.runQueued(r.newQueuedFire(&spec, time.Now(), false, r.newRunID(), nil), nil)
	r.runQueued(r.newQueuedFire(&skip, time.Now(), false, r.newRunID(), nil), nil)
	runs := waitReports(t, sink, 1+n+2, 30*time.Second)
	ids := map[string]bool{}
	stopped := 0
	for _, rep := range runs {
		if ids[rep.ID] {
			t.Fatalf("run %s recorded twice", rep.ID)
		}
		ids[rep.ID] = true
		switch {
		case rep.TaskID == "retry":
			if rep.Attempt != 1 || rep.Result != protocol.ResultFailed {
				t.Fatalf("the fire in its retry delay: %+v", rep)
			}
		case rep.Result == protocol.ResultSkipped && rep.Output == "skipped: the worker stopped before a concurrency slot was free":
			stopped++
		default:
			t.Fatalf("report %+v", rep)
		}
	}
	if len(runs) != 1+n+2 || stopped != n+2 || r.limit.waiting() != 0 || r.limit.wakes.Load() != 0 {
		t.Fatalf("%d reports, %d stopped, %d waiting, %d wakes", len(runs), stopped, r.limit.waiting(), r.limit.wakes.Load())
	}
}

// A fire of a task that skips at capacity is recorded at once, in the call
// that found the node full: it never queues, holds no goroutine, and the
// fires that wait behind the full node are not held up by it.
func TestSkipAtCapacityIsRecordedAtOnce(t *testing.T) {
	const n = 10_000
	r, sink, _ := queueRunner(t, 1)
	r.limit.tryAcquire()
	skip := queueSpec("s", "http://127.0.0.1:1/", time.Hour)
	skip.AtCapacity = protocol.AtCapacitySkip
	before := runtime.NumGoroutine()
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		r.runQueued(r.newQueuedFire(&skip, time.Now(), false, r.newRunID(), nil), &done)
	}
	done.Wait() // each ended in its own call
	if r.limit.waiting() != 0 || r.active.count() != 0 || goroutinesSince(before) > fewGoroutines(n) {
		t.Fatalf("%d waiting, %d active, %d more goroutines", r.limit.waiting(), r.active.count(), goroutinesSince(before))
	}
	for _, rep := range waitReports(t, sink, n, 30*time.Second) {
		if rep.Result != protocol.ResultSkipped || rep.Output != "skipped: the node was at its max concurrency (at_capacity: skip)" {
			t.Fatalf("report %+v", rep)
		}
	}
}

// A schedule's fire on a node with fewer free slots than members: those that
// got a slot start together, the skip ones beyond are recorded skipped, the
// wait ones queue and run in member order, and the body returns when all
// have ended.
func TestFireGroupQueuesBeyondTheFreeSlots(t *testing.T) {
	const members, slots = 60, 10
	hold := make(chan struct{})
	url, paths := orderTarget(t, nil, hold)
	f := newFanOutRunner(t)
	f.limit.setMax(slots)
	sch := protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)}
	skips := map[string]bool{}
	for i := range members {
		spec := httpSpec(fmt.Sprintf("m%02d", i), url, sch)
		if i >= slots && i%2 == 1 {
			spec.AtCapacity = protocol.AtCapacitySkip
			skips[spec.ID] = true
		}
		if err := f.start(spec); err != nil {
			t.Fatal(err)
		}
		f.job(spec.ID).since = time.Time{}
	}
	g := f.job("m00").group
	order := map[string]int{}
	for i, tj := range g.snapshot() {
		order[tj.spec.ID] = i
	}
	fire := g.next(time.Now())
	ended := make(chan struct{})
	go func() { f.fireGroupAt(g, fire); close(ended) }() // returns when every run ended
	// The first members hold the slots (their requests are held): the
	// skip members find the node full, the wait members queue.
	wait := members - slots - len(skips)
	testutil.Eventually(t, 10*time.Second, func() bool { return len(paths()) == slots && f.limit.waiting() == wait },
		"%d requests, %d waiting; want %d and %d", len(paths()), f.limit.waiting(), slots, wait)
	if n := len(f.sink.all()); n > len(skips) {
		t.Fatalf("%d reports before any slot freed", n)
	}
	close(hold)
	<-ended
	runs := waitReports(t, f.sink, members, 10*time.Second)
	started := map[int]time.Time{}
	var heldStart time.Time
	for _, rep := range runs {
		if !rep.ScheduledAt.Equal(fire) {
			t.Fatalf("report %+v: not the fire's", rep)
		}
		i := order[rep.TaskID]
		switch {
		case i < slots:
			if rep.Result != protocol.ResultSuccess || (!heldStart.IsZero() && !rep.StartedAt.Equal(heldStart)) {
				t.Fatalf("member %d, holding a slot: %+v (the others started at %s)", i, rep, heldStart)
			}
			heldStart = rep.StartedAt
		case skips[rep.TaskID]:
			if rep.Result != protocol.ResultSkipped || !strings.Contains(rep.Output, "(at_capacity: skip)") {
				t.Fatalf("member %d skips at capacity: %+v", i, rep)
			}
		case rep.Result != protocol.ResultSuccess:
			t.Fatalf("member %d waits: %+v", i, rep)
		default:
			started[i] = rep.StartedAt
		}
	}
	// The waiting members got their slots (their start) in member order.
	prev := heldStart
	for i := slots; i < members; i++ {
		if at, ok := started[i]; ok {
			if at.Before(prev) {
				t.Fatalf("member %d got its slot at %s, before an earlier member (%s)", i, at, prev)
			}
			prev = at
		}
	}
	if len(started) != wait || f.active.count() != 0 || f.limit.waiting() != 0 {
		t.Fatalf("%d waiting members served (want %d), %d active, %d waiting", len(started), wait, f.active.count(), f.limit.waiting())
	}
}

// A catch-up run and a run-once go through the node's queue like a fire:
// queued when the node is full, run when a slot frees, the catch-up's
// report saying what it stands for.
func TestRunOnceAndCatchUpQueueForASlot(t *testing.T) {
	url, _ := orderTarget(t, nil, nil)
	r, sink, _ := queueRunner(t, 1)
	r.limit.tryAcquire()
	first := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	r.runOnce(queueSpec("c", url+"/c", time.Minute), &protocol.CatchUp{Fires: 3, First: first, Last: first.Add(2 * time.Minute)})
	r.runOnce(queueSpec("m", url+"/m", time.Minute), nil)
	if r.limit.waiting() != 2 {
		t.Fatalf("%d waiting, want the catch-up and the run-once", r.limit.waiting())
	}
	r.limit.release()
	runs := waitReports(t, sink, 2, 10*time.Second)
	for _, rep := range runs {
		if rep.Result != protocol.ResultSuccess || !rep.Manual {
			t.Fatalf("report %+v", rep)
		}
		if rep.TaskID == "c" && (rep.Covers != 3 || !strings.HasPrefix(rep.Output, "catch-up run (misfire policy run_once) for 3 missed fires from 2026-11-26T10:00:00Z")) {
			t.Fatalf("catch-up report %+v", rep)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return r.active.count() == 0 }, "runs still active")
}

// Under a mixed load (overlap and at-capacity policies, retries, short
// timeouts, failing and slow answers, the limit changing every few
// milliseconds, and in one case the worker stopping midway) every fire
// ends: the caller waiting for them is told, each has exactly one report of
// its first attempt, and nothing is left active, queued or holding a slot.
func TestMixedLoadEndsEveryFire(t *testing.T) {
	for _, stopMidway := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop=%v", stopMidway), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // the target's own work
				if rand.IntN(4) == 0 {
					rw.WriteHeader(http.StatusInternalServerError)
				}
			}))
			t.Cleanup(srv.Close)
			r, sink, stop := queueRunner(t, 4)
			r.backoff = 5 * time.Millisecond
			if stopMidway {
				time.AfterFunc(time.Duration(200+rand.IntN(600))*time.Millisecond, stop)
			}
			var specs []protocol.TaskSpec
			for i := range 30 {
				s := queueSpec(fmt.Sprintf("t%d", i), srv.URL, time.Duration(20+rand.IntN(300))*time.Millisecond)
				s.Overlap = []string{protocol.OverlapAllow, protocol.OverlapSkip, protocol.OverlapQueue}[rand.IntN(3)]
				if rand.IntN(3) == 0 {
					s.AtCapacity = protocol.AtCapacitySkip
				}
				s.Retries = rand.IntN(3)
				specs = append(specs, s)
			}
			limits := time.NewTicker(7 * time.Millisecond)
			defer limits.Stop()
			const n = 5000
			var done sync.WaitGroup
			for i := range n {
				s := specs[rand.IntN(len(specs))]
				done.Add(1)
				r.runQueued(r.newQueuedFire(&s, time.Unix(int64(i), 0), false, r.newRunID(), nil), &done)
				select {
				case <-limits.C:
					r.limit.setMax(1 + rand.IntN(8))
				default:
				}
				if i%5 == 0 {
					time.Sleep(time.Millisecond) // fires arrive over a second or two
				}
			}
			ended := make(chan struct{})
			go func() { done.Wait(); close(ended) }()
			select {
			case <-ended:
			case <-time.After(2 * time.Minute):
				t.Fatalf("fires never ended: %d active, %d waiting", r.active.count(), r.limit.waiting())
			}
			firsts := func() int {
				c := 0
				for _, rep := range sink.all() {
					if rep.Attempt == 1 {
						c++
					}
				}
				return c
			}
			testutil.Eventually(t, 30*time.Second, func() bool { return firsts() >= n }, "first attempts reported")
			testutil.Eventually(t, 10*time.Second, func() bool { return r.active.count() == 0 }, "fires still active")
			if f := firsts(); f != n || r.limit.waiting() != 0 || r.limit.n != 0 {
				t.Fatalf("%d first attempts reported for %d fires, %d waiting, %d slots held", f, n, r.limit.waiting(), r.limit.n)
			}
		})
	}
}
