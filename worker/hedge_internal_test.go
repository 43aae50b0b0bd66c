package worker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

// hangingMaster accepts every call and never answers it: a master whose
// database hangs, as the worker sees it. It counts the calls and those whose
// request the worker cancelled.
type hangingMaster struct {
	calls, cancelled atomic.Int32
}

func (m *hangingMaster) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	m.calls.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
		m.cancelled.Add(1)
	case <-time.After(30 * time.Second):
	}
}

// answeringMaster answers claims as won by w1 and run batches as stored.
type answeringMaster struct {
	calls atomic.Int32
	delay time.Duration
}

func (m *answeringMaster) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	m.calls.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	time.Sleep(m.delay)
	rw.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case protocol.PathMasterClaim:
		_, _ = rw.Write([]byte(`{"won":true,"winner":"w1"}`))
	default:
		_, _ = rw.Write([]byte(`{}`))
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A claim to a master that hangs is sent to the next master after the hedge
// delay; the answer comes from it long before the claim's timeout, the hung
// request is cancelled, and the next claims start at the master that
// answered.
func TestClaimHedgesToTheNextMasterWhenTheCurrentHangs(t *testing.T) {
	t.Parallel()
	hung, good := &hangingMaster{}, &answeringMaster{}
	hungURL, goodURL := serve(t, hung), serve(t, good)
	w := testWorkerWith(t, hungURL+","+goodURL)
	w.masters.claimHedge = 100 * time.Millisecond

	start := time.Now()
	won, err := w.claimFire(context.Background(), "t1", time.Now().Truncate(time.Second), newRunID())
	took := time.Since(start)
	if err != nil || !won {
		t.Fatalf("claim with the current master hanging: won %v, err %v", won, err)
	}
	if took < w.masters.claimHedge || took >= protocol.ClaimTimeout {
		t.Fatalf("claim answered after %s, want after the hedge delay %s and before the hung call's timeout %s", took,
			w.masters.claimHedge, protocol.ClaimTimeout)
	}
	if hung.calls.Load() != 1 || good.calls.Load() != 1 {
		t.Fatalf("calls: hung %d, good %d; want one each", hung.calls.Load(), good.calls.Load())
	}
	deadline := time.Now().Add(30 * time.Second)
	for hung.cancelled.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the losing request to the hung master was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w.masters.current() != goodURL {
		t.Fatalf("current master %s, want the one that answered (%s)", w.masters.current(), goodURL)
	}
	// The next claim goes to the master that answered, first: it alone is
	// asked. The hedge delay is made longer than the claim's timeout, so
	// that a claim slowed by a loaded machine is not hedged either: what is
	// checked is whom it asked, not how fast the answer came.
	w.masters.claimHedge = 2 * protocol.ClaimTimeout
	if won, err := w.claimFire(context.Background(), "t1", time.Now().Truncate(time.Second), newRunID()); err != nil || !won {
		t.Fatalf("second claim: won %v, err %v", won, err)
	}
	if hung.calls.Load() != 1 || good.calls.Load() != 2 {
		t.Fatalf("second claim: the hung master got %d calls, the one that answered %d; want it alone asked (1 and 2)",
			hung.calls.Load(), good.calls.Load())
	}
}

// A current master that answers within the hedge delay is the only one
// asked; one that fails fast (503) sends the call on at once, not after the
// delay.
func TestHedgeOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	fast, other := &answeringMaster{delay: 5 * time.Millisecond}, &answeringMaster{}
	w := testWorkerWith(t, serve(t, fast)+","+serve(t, other))
	w.masters.claimHedge = time.Second
	for range 5 {
		if won, err := w.claimFire(context.Background(), "t1", time.Now(), newRunID()); err != nil || !won {
			t.Fatalf("claim: won %v, err %v", won, err)
		}
	}
	if fast.calls.Load() != 5 || other.calls.Load() != 0 {
		t.Fatalf("calls %d and %d: want the current master alone", fast.calls.Load(), other.calls.Load())
	}

	failing, furls := newStatusMasters(t, 1)
	failing[0].status.Store(http.StatusServiceUnavailable)
	good := &answeringMaster{}
	w2 := testWorkerWith(t, furls[0]+","+serve(t, good))
	w2.masters.claimHedge = 10 * time.Second
	start := time.Now()
	if won, err := w2.claimFire(context.Background(), "t1", time.Now(), newRunID()); err != nil || !won {
		t.Fatalf("claim after a 503: won %v, err %v", won, err)
	}
	if took := time.Since(start); took > 2*time.Second || good.calls.Load() != 1 {
		t.Fatalf("after a 503 the next master was asked after %s (%d calls), want at once", took, good.calls.Load())
	}
}

// A batch of run reports is hedged too: with the current master hanging it
// is stored by the next one within the report hedge delay, well inside the
// delivery's timeout.
func TestRunReportsHedgeToTheNextMaster(t *testing.T) {
	t.Parallel()
	hung, good := &hangingMaster{}, &answeringMaster{}
	w := testWorkerWith(t, serve(t, hung)+","+serve(t, good))
	w.masters.reportHedge = 100 * time.Millisecond
	start := time.Now()
	if _, err := w.postRuns(context.Background(), []protocol.RunReport{{ID: "r1", TaskID: "t1"}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > protocol.RunsTimeout/3 || good.calls.Load() != 1 {
		t.Fatalf("batch stored after %s by %d calls to the live master", took, good.calls.Load())
	}
}

// Every master hanging: the claim fails at its own timeout (the caller's
// context), having asked each master once.
func TestHedgeEveryMasterHanging(t *testing.T) {
	t.Parallel()
	a, b := &hangingMaster{}, &hangingMaster{}
	w := testWorkerWith(t, serve(t, a)+","+serve(t, b))
	w.masters.claimHedge = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := w.claimFire(ctx, "t1", time.Now(), newRunID()); err == nil {
		t.Fatal("a claim with every master hanging succeeded")
	}
	if a.calls.Load() != 1 || b.calls.Load() != 1 {
		t.Fatalf("calls %d and %d, want one each", a.calls.Load(), b.calls.Load())
	}
}
