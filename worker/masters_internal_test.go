package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// statusMaster answers every call with its current status (200 with {}).
type statusMaster struct {
	status atomic.Int32
	calls  atomic.Int32
}

func (m *statusMaster) ServeHTTP(rw http.ResponseWriter, _ *http.Request) {
	m.calls.Add(1)
	st := int(m.status.Load())
	if st == 0 {
		st = http.StatusOK
	}
	rw.WriteHeader(st)
	if st == http.StatusOK {
		rw.Write([]byte("{}"))
	} else {
		rw.Write([]byte(`{"error":"scripted"}`))
	}
}

func newStatusMasters(t *testing.T, n int) ([]*statusMaster, []string) {
	ms := make([]*statusMaster, n)
	urls := make([]string, n)
	for i := range ms {
		ms[i] = &statusMaster{}
		srv := httptest.NewServer(ms[i])
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	return ms, urls
}

func testWorkerWith(t *testing.T, masterURL string) *Worker {
	t.Helper()
	w, err := New(Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, ClusterKey: "k"}, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	w.masters = newMasters(masterURL, testutil.Logger(t))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// A 5xx moves the call, and the later ones, to the next master; a 4xx is the
// cluster's answer and is returned as it is, with no other master asked.
func TestPostFailsOverOn5xxNotOn4xx(t *testing.T) {
	t.Parallel()
	ms, urls := newStatusMasters(t, 3)
	w := testWorkerWith(t, urls[0]+","+urls[1]+","+urls[2])
	ctx := context.Background()

	ms[0].status.Store(http.StatusServiceUnavailable)
	if err := w.post(ctx, protocol.PathMasterRuns, nil, []byte("{}"), nil); err != nil {
		t.Fatalf("a 503 from the first master should move on to the second: %v", err)
	}
	if ms[0].calls.Load() != 1 || ms[1].calls.Load() != 1 || w.masters.current() != urls[1] {
		t.Fatalf("calls %d %d, current %s", ms[0].calls.Load(), ms[1].calls.Load(), w.masters.current())
	}
	// Sticky: the next call starts at the second master.
	if err := w.post(ctx, protocol.PathMasterRuns, nil, []byte("{}"), nil); err != nil || ms[0].calls.Load() != 1 || ms[1].calls.Load() != 2 {
		t.Fatalf("second call: %v, calls %d %d", err, ms[0].calls.Load(), ms[1].calls.Load())
	}
	for _, st := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusConflict, http.StatusRequestEntityTooLarge} {
		ms[1].status.Store(int32(st))
		before := ms[2].calls.Load()
		err := w.post(ctx, protocol.PathMasterRuns, nil, []byte("{}"), nil)
		var se *protocol.StatusError
		if st == http.StatusUnauthorized {
			if !errors.Is(err, errMasterUnauthorized) {
				t.Errorf("401: %v", err)
			}
		} else if !errors.As(err, &se) || se.Status != st {
			t.Errorf("%d: got %v", st, err)
		}
		if ms[2].calls.Load() != before || w.masters.current() != urls[1] {
			t.Errorf("%d failed over (third master calls %d, current %s)", st, ms[2].calls.Load(), w.masters.current())
		}
	}
	// Every master failing: the last error comes back and a later call is
	// retried by the caller (the reporter's or registration's backoff).
	for _, m := range ms {
		m.status.Store(http.StatusBadGateway)
	}
	err := w.post(ctx, protocol.PathMasterRuns, nil, []byte("{}"), nil)
	var se *protocol.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadGateway {
		t.Fatalf("all failing: %v", err)
	}
}

// A master that does not answer at all (closed) is skipped; a call the caller
// cancelled does not move to another master.
func TestPostFailsOverOnConnectionErrors(t *testing.T) {
	t.Parallel()
	ms, urls := newStatusMasters(t, 1)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	w := testWorkerWith(t, dead.URL+","+urls[0])
	if err := w.post(context.Background(), protocol.PathMasterClaim, nil, []byte("{}"), nil); err != nil || ms[0].calls.Load() != 1 {
		t.Fatalf("dead first master: %v, live calls %d", err, ms[0].calls.Load())
	}

	w2 := testWorkerWith(t, urls[0]+","+dead.URL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w2.post(ctx, protocol.PathMasterClaim, nil, []byte("{}"), nil); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if w2.masters.current() != urls[0] {
		t.Fatalf("a cancelled call moved the worker to %s", w2.masters.current())
	}
}

// Many calls failing on one master at once move the worker one step, not
// past the live master behind it.
func TestConcurrentFailuresMoveOneStep(t *testing.T) {
	t.Parallel()
	ms, urls := newStatusMasters(t, 3)
	ms[0].status.Store(http.StatusInternalServerError)
	w := testWorkerWith(t, urls[0]+","+urls[1]+","+urls[2])
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.post(context.Background(), protocol.PathMasterRuns, nil, []byte("{}"), nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if w.masters.current() != urls[1] || ms[2].calls.Load() != 0 {
		t.Fatalf("current %s, third master calls %d", w.masters.current(), ms[2].calls.Load())
	}
}

func TestMasterURLs(t *testing.T) {
	t.Parallel()
	got := MasterURLs(" http://a:1/ ,http://b:2,, ")
	want := []string{"http://a:1", "http://b:2", "", ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if m := newMasters("http://a:1/, http://b:2", testutil.Logger(t)); !reflect.DeepEqual(m.urls, []string{"http://a:1", "http://b:2"}) {
		t.Fatalf("masters %q", m.urls)
	}
}

// A re-registration started by a 401 is background work of the worker: Stop
// cancels it and waits for it, and none starts after Stop.
func TestStopEndsAndWaitsForReregistration(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	ended := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != protocol.PathMasterRegister {
			rw.WriteHeader(http.StatusOK)
			rw.Write([]byte("{}"))
			return
		}
		io.Copy(io.Discard, r.Body) // then the server notices the client going away
		entered <- struct{}{}
		<-r.Context().Done() // a master that hangs until the worker gives up
		close(ended)
	}))
	t.Cleanup(srv.Close)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	w, err := New(Config{Identity: "w1", Protocol: "http", IP: "127.0.0.1", Port: 1, ClusterKey: "k", AutoRegister: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	w.masters = newMasters(srv.URL, log)
	w.maybeReregister(errMasterUnauthorized)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the re-registration never reached the master")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.Stop(sctx)
	// The goroutine logs its failure before it ends, and Stop waits for it.
	if !strings.Contains(logs.String(), "re-registration failed") {
		t.Fatalf("Stop returned while the re-registration was still going; log:\n%s", logs.String())
	}
	select {
	case <-ended: // the master saw the request cancelled, not timed out after 30 s
	case <-time.After(5 * time.Second):
		t.Fatal("the re-registration's request was not cancelled by Stop")
	}
	w.regMu.Lock()
	w.lastReg = time.Time{}
	w.regMu.Unlock()
	w.maybeReregister(errMasterUnauthorized)
	select {
	case <-entered:
		t.Fatal("a re-registration started after Stop")
	case <-time.After(300 * time.Millisecond):
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
