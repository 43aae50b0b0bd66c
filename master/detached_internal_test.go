package master

import (
	"context"
	"testing"
	"time"
)

// A detached write outlives the request that started it but not the engine:
// the caller hanging up leaves it running, stop's cancellation ends it.
func TestDetachedEndsWithTheMasterNotTheCaller(t *testing.T) {
	t.Parallel()
	l := newLifecycle()
	req, hangUp := context.WithCancel(context.Background())
	d, cancel := l.detached(req, time.Hour)
	defer cancel()
	hangUp()
	if d.Err() != nil {
		t.Fatalf("the caller hanging up ended the detached write: %v", d.Err())
	}
	l.stop(nil)
	select {
	case <-d.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine's cancellation did not end the detached write")
	}
}

// stop cancels and waits for the work in flight, refuses new work, and a
// second stop only waits.
func TestLifecycleStopWaitsAndRefuses(t *testing.T) {
	t.Parallel()
	l := newLifecycle()
	started, ended := make(chan struct{}), make(chan struct{})
	if !l.goBackground(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(ended)
	}) {
		t.Fatal("work refused before stop")
	}
	<-started
	var before bool
	if again := l.stop(func() { before = true }); again || !before {
		t.Fatalf("first stop: again %v, beforeWait called %v", again, before)
	}
	select {
	case <-ended:
	default:
		t.Fatal("stop returned before the work ended")
	}
	if l.goBackground(func(context.Context) { t.Error("work ran after stop") }) {
		t.Fatal("work accepted after stop")
	}
	if _, ok := l.track(); ok {
		t.Fatal("track accepted after stop")
	}
	if again := l.stop(func() { t.Error("beforeWait called twice") }); !again {
		t.Fatal("second stop did not say so")
	}
}
