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
	return &masters{urls: urls, log: log}
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
