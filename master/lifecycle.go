package master

import (
	"context"
	"sync"
	"time"
)

// lifecycle is the background work of one engine: everything it starts
// (duties' passes, re-pushes, child runs, notifications, claim decisions)
// runs under ctx and is counted, so that Stop cancels it and waits for all of
// it before the caller closes the database.
type lifecycle struct {
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	wg      sync.WaitGroup
	stopped bool
}

// newLifecycle is a lifecycle whose work has not begun.
func newLifecycle() *lifecycle {
	ctx, cancel := context.WithCancel(context.Background())
	return &lifecycle{ctx: ctx, cancel: cancel}
}

// track counts one piece of background work unless stop has begun; the
// caller runs it under l.ctx and calls done when it ends.
func (l *lifecycle) track() (done func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil, false
	}
	l.wg.Add(1)
	return l.wg.Done, true
}

// detached keeps ctx's values but not its cancellation, for short writes a
// caller hanging up must not tear (a claim, a rollback on workers); stop
// still ends them, and the HTTP server's shutdown waits for their requests.
func (l *lifecycle) detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	d, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	stop := context.AfterFunc(l.ctx, cancel)
	return d, func() { stop(); cancel() }
}

// goBackground runs fn in a goroutine under l.ctx, counted so that stop
// waits for it. After stop it does nothing and reports false.
func (l *lifecycle) goBackground(fn func(ctx context.Context)) bool {
	done, ok := l.track()
	if !ok {
		return false
	}
	go func() {
		defer done()
		fn(l.ctx)
	}()
	return true
}

// stop refuses new work, cancels the running work and, after calling
// beforeWait (nil: none), waits for it to end. It reports whether an earlier
// call had already stopped it (then it only waits).
func (l *lifecycle) stop(beforeWait func()) (again bool) {
	l.mu.Lock()
	again = l.stopped
	l.stopped = true
	l.mu.Unlock()
	if !again {
		l.cancel()
		if beforeWait != nil {
			beforeWait()
		}
	}
	l.wg.Wait()
	return again
}
