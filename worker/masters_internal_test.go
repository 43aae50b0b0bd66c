package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

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
	got := MasterURLs(" http://a:1/ ,http://b:2,, ")
	want := []string{"http://a:1", "http://b:2", "", ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if m := newMasters("http://a:1/, http://b:2", testutil.Logger(t)); !reflect.DeepEqual(m.urls, []string{"http://a:1", "http://b:2"}) {
		t.Fatalf("masters %q", m.urls)
	}
}
