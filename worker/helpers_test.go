package worker_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// testLogger logs through t.Log and drops records once the test has ended.
func testLogger(t testing.TB) *slog.Logger {
	w := &tlogWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tlogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
