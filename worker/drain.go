package worker

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Time limits of a stop beyond the drain timeout (Config.StopTimeout).
const (
	// StopSlack is what a Stop needs beyond the drain timeout: the killed
	// runs end and are journaled (killWait), the last reports are delivered
	// (3s) and a master hears that this node goes offline. A caller's Stop
	// context should allow StopTimeout + StopSlack.
	StopSlack = 15 * time.Second
	// killWait bounds the wait for the runs killed at the end of a drain:
	// their request or process is cancelled, so they end at once.
	killWait = 2 * time.Second
	// offlineAttemptTimeout bounds the offline call to one master, so that
	// one that hangs leaves time for the next in the list.
	offlineAttemptTimeout = 4 * time.Second
)

// activeRuns counts the fires being executed (attempts, retry delays and
// waits for a concurrency slot included), so that a drain knows when the
// last one has ended.
type activeRuns struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed while n == 0; nil means closed
}

func (a *activeRuns) add(d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 && d > 0 {
		a.zero = make(chan struct{})
	}
	a.n += d
	if a.n == 0 && a.zero != nil {
		close(a.zero)
		a.zero = nil
	}
}

// idle returns a channel closed when no fire is being executed.
func (a *activeRuns) idle() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.zero == nil {
		return closedChan
	}
	return a.zero
}

func (a *activeRuns) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// drain is the first part of a stop: the worker takes no new fire (queued
// ones are recorded skipped, RunOnce is refused), stops scheduling, and
// gives the runs in progress the drain timeout to end. The runs still going
// then are cancelled and reported as killed, and their reports are queued
// (and journaled) before the delivery of reports stops.
func (w *Worker) drain(ctx context.Context) {
	w.runner.draining.Store(true)
	start := time.Now()
	gctx, cancel := context.WithTimeout(ctx, w.cfg.StopTimeout)
	defer cancel()
	if err := w.shutdown(gctx, true); err != nil && gctx.Err() == nil {
		w.log.Error("stop scheduling", "err", err)
	}
	select {
	case <-w.runner.active.idle():
	case <-gctx.Done():
	}
	if n := w.runner.active.count(); n > 0 {
		w.log.Warn("drain timeout passed: killing the runs still in progress", "runs", n,
			"drain_timeout", w.cfg.StopTimeout, "waited", time.Since(start).Round(time.Millisecond))
	} else if time.Since(start) > time.Second {
		w.log.Info("drained: the runs in progress have ended", "waited", time.Since(start).Round(time.Millisecond))
	}
	w.killRuns()
	kctx, kcancel := context.WithTimeout(ctx, killWait)
	defer kcancel()
	select {
	case <-w.runner.active.idle():
	case <-kctx.Done():
		w.log.Error("runs did not end once killed: their reports may be lost", "runs", w.runner.active.count())
	}
}

// tellOffline tells a master that this node goes offline, so that no fire
// waits for its health checks to fail: it tries the masters along the list
// (see masters.do), each for at most offlineAttemptTimeout.
func (w *Worker) tellOffline(ctx context.Context, name, secret string) error {
	headers := map[string]string{protocol.HeaderNode: name, protocol.HeaderSecret: secret}
	var base string
	err := w.masters.do(ctx, func(b string) error {
		base = b
		actx, cancel := context.WithTimeout(ctx, offlineAttemptTimeout)
		defer cancel()
		// A master that does not answer within its bound fails as
		// unreachable (a send or read error), so the next one is tried.
		return protocol.Call(actx, w.client, http.MethodPost, b+protocol.PathMasterOffline, headers, []byte("{}"), protocol.MaxSmallBody, nil)
	})
	if err != nil {
		return callError(err, base, base+protocol.PathMasterOffline)
	}
	w.log.Info("told the master this node goes offline", "url", base)
	return nil
}
