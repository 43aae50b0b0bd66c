// Package testutil holds the test helpers that need no database: a test-bound
// logger, a context cancelled with the test, and a polling helper. The tests
// of every package use them, the worker's included (which must not link the
// store); store/storetest adds the databases on top.
package testutil

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ctx returns a context cancelled when the test ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// Discard is a logger that drops everything.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Logger returns a logger writing through t.Log (shown with -v or on failure).
// Records logged after the test's cleanup started are dropped, so background
// goroutines that outlive the test cannot make it panic.
func Logger(t testing.TB) *slog.Logger {
	tw := &testWriter{t: t}
	t.Cleanup(tw.stop)
	return slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// Eventually polls cond every 10ms until it holds, failing the test with msg
// when timeout passes first. Call it from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, fmt.Sprintf(msg, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
