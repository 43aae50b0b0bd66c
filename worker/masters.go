package worker

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// Failover pacing between the masters tried by one call: the first other
// master is tried at once, each further one after a doubling pause, so a
// worker whose every master is down does not hammer them.
const (
	failoverFirstPause = 50 * time.Millisecond
	failoverMaxPause   = time.Second
)

// Hedge delays: a call that can go to several masters goes to the current
// one first and, when no answer came within the delay, to the next one too
// (and so on along the list); the first good answer wins and the others are
// cancelled. A master whose database hangs thus costs a claim ClaimHedgeDelay,
// not the claim's whole timeout, and no fire. Sending twice is harmless: the
// database keeps one winner per fire and each run id once.
const (
	// ClaimHedgeDelay is well above a healthy claim's answer (a few
	// milliseconds; a lower-ranked executor's waits for a better one run
	// 150 ms a rank) and well under a second, the scale of a fire.
	ClaimHedgeDelay = 250 * time.Millisecond
	// ReportHedgeDelay is longer: a batch of run reports takes longer to
	// store, and nothing waits for it by the clock.
	ReportHedgeDelay = time.Second
)

// MasterURLs splits a --master value (one URL or a comma-separated list)
// into its URLs, spaces and trailing slashes trimmed, empty entries kept as ""
// so that a validator can name them.
func MasterURLs(raw string) []string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = strings.TrimRight(strings.TrimSpace(p), "/")
	}
	return parts
}

// masters is the worker's list of master URLs and the one it currently uses.
// Every worker-to-master call starts at the current master; a connection
// error or a 5xx answer moves on to the next one, which then stays current
// (sticky), so calls do not bounce back to a dead master.
type masters struct {
	urls []string
	cur  atomic.Int64
	log  *slog.Logger
	// claimHedge and reportHedge are ClaimHedgeDelay and ReportHedgeDelay;
	// tests shorten them.
	claimHedge, reportHedge time.Duration
}

func newMasters(raw string, log *slog.Logger) *masters {
	var urls []string
	for _, u := range MasterURLs(raw) {
		if u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		// No master configured (a manual worker in tests): calls fail as a
		// bad request, exactly as with an empty single URL.
		urls = []string{""}
	}
	return &masters{urls: urls, log: log, claimHedge: ClaimHedgeDelay, reportHedge: ReportHedgeDelay}
}

// current is the URL of the master in use.
func (ms *masters) current() string { return ms.urls[int(ms.cur.Load())%len(ms.urls)] }

// do calls fn with each master's base URL, starting at the current one, until
// fn succeeds or fails in a way another master would not fix (a 4xx answer,
// a bad request, or ctx ended by the caller). It returns fn's last error.
func (ms *masters) do(ctx context.Context, fn func(base string) error) error {
	start := int(ms.cur.Load())
	pause := failoverFirstPause
	var err error
	for i := range len(ms.urls) {
		idx := (start + i) % len(ms.urls)
		if i > 1 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(pause):
			}
			pause = min(pause*2, failoverMaxPause)
		}
		err = fn(ms.urls[idx])
		if err == nil || !failsOver(ctx, err) {
			return err
		}
		next := (idx + 1) % len(ms.urls)
		// Only the first of several calls failing on the same master moves
		// the current one, so concurrent failures do not skip a live master.
		if next != idx && ms.cur.CompareAndSwap(int64(idx), int64(next)) {
			ms.log.Warn("master failed; now using the next master", "failed", ms.urls[idx], "master", ms.urls[next], "err", err)
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return err
}

// hedge calls fn with the current master's base URL and, each time delay
// passes with no answer or an attempt fails in a way another master may not
// (failsOver), with the next master's too, every attempt under its own
// context. The first attempt that succeeds or fails in a way no master would
// fix (a 4xx) gives the answer; the others are cancelled. It returns the base
// URL of that attempt (or of the last failed one) and its error.
//
// A failed master moves the current one on, as do's failures do; so does a master
// that answered while the current one had not yet: calls then stop waiting
// the delay on a master that hangs.
func (ms *masters) hedge(ctx context.Context, delay time.Duration, fn func(ctx context.Context, base string) error) (string, error) {
	n := len(ms.urls)
	if n == 1 {
		return ms.urls[0], fn(ctx, ms.urls[0])
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel() // the attempts still running lose
	type result struct {
		idx int
		err error
	}
	results := make(chan result, n) // buffered: a loser's send never blocks
	start := int(ms.cur.Load()) % n
	launched, running := 0, 0
	launch := func() {
		idx := (start + launched) % n
		launched++
		running++
		go func() { results <- result{idx, fn(actx, ms.urls[idx])} }()
	}
	launch()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	last := result{idx: start}
	for running > 0 {
		select {
		case <-timer.C:
			if launched < n && ctx.Err() == nil {
				ms.log.Debug("no answer from the master yet; asking the next one too", "master", ms.urls[(start+launched-1)%n], "after", delay)
				launch()
				timer.Reset(delay)
			}
		case r := <-results:
			running--
			if r.err == nil || !failsOver(ctx, r.err) {
				if r.idx != start {
					ms.moveOn(start, r.idx, "master slow; now using the next master", "slow", nil)
				}
				return ms.urls[r.idx], r.err
			}
			last = r
			ms.moveOn(r.idx, (r.idx+1)%n, "master failed; now using the next master", "failed", r.err)
			if launched < n && ctx.Err() == nil {
				launch()
				timer.Reset(delay)
			}
		}
	}
	return ms.urls[last.idx], last.err
}

// moveOn makes to the current master if from still is: only the first of
// several calls that saw from fail or lag moves it, so concurrent calls do not
// skip a live master. The log names from under key (failed or slow).
func (ms *masters) moveOn(from, to int, msg, key string, err error) {
	if from != to && ms.cur.CompareAndSwap(int64(from), int64(to)) {
		args := []any{key, ms.urls[from], "master", ms.urls[to]}
		if err != nil {
			args = append(args, "err", err)
		}
		ms.log.Warn(msg, args...)
	}
}

// failsOver reports whether err is a failure another master may not have: the
// master is unreachable, broke the connection, is too slow for the caller's
// deadline, or answered 5xx. A 4xx is an answer about this request, the same
// from every master of the cluster; a caller's cancel is no master's fault.
func failsOver(ctx context.Context, err error) bool {
	var se *protocol.StatusError
	if errors.As(err, &se) {
		return se.Status >= http.StatusInternalServerError
	}
	var ce *protocol.CallError
	if !errors.As(err, &ce) || (ce.Op != protocol.OpSend && ce.Op != protocol.OpRead) {
		return false
	}
	return !errors.Is(ctx.Err(), context.Canceled)
}
