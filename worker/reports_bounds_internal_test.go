package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// boundedMaster refuses batches over the master's byte bound with 413, as
// the master does, and records every batch's size and the runs stored.
type boundedMaster struct {
	mu       sync.Mutex
	sizes    []int
	stored   map[string]int
	tooLarge int
}

func (m *boundedMaster) post(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
	body, err := json.Marshal(protocol.RunsRequest{Runs: runs})
	if err != nil {
		return protocol.RunsResponse{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sizes = append(m.sizes, len(body))
	if len(body) > protocol.MaxRunsBatchBytes || len(runs) > protocol.MaxRunsPerBatch {
		m.tooLarge++
		return protocol.RunsResponse{}, fmt.Errorf("%w: %w", errBatchRefused, &protocol.StatusError{Status: http.StatusRequestEntityTooLarge})
	}
	for _, r := range runs {
		m.stored[r.ID]++
	}
	return protocol.RunsResponse{Accepted: len(runs)}, nil
}

func (m *boundedMaster) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.stored)
}

// Reports of the largest output JSON can carry (64 KiB of control
// characters, six bytes each) go in batches that the master takes: never
// over its byte bound, from the in-memory queue and from the journal after a
// restart alike, each run once.
func TestReporterBatchesFitTheMasterBound(t *testing.T) {
	t.Parallel()
	worst := strings.Repeat("\x01", protocol.MaxOutputBytes)
	for _, fromJournal := range []bool{false, true} {
		dir := t.TempDir()
		m := &boundedMaster{stored: map[string]int{}}
		post := m.post
		if fromJournal {
			down := func(context.Context, []protocol.RunReport) (protocol.RunsResponse, error) {
				return protocol.RunsResponse{}, fmt.Errorf("connection refused")
			}
			first := newReporter(dir, 0, testutil.Discard(), down)
			for i := range 30 {
				first.add(protocol.RunReport{ID: fmt.Sprintf("j%02d", i), TaskID: "t", Output: worst})
			}
			first.mu.Lock()
			first.file.Close()
			first.file = nil
			first.mu.Unlock()
		}
		r := newReporter(dir, 0, testutil.Discard(), post)
		ctx, cancel := context.WithCancel(context.Background())
		go r.run(ctx)
		waitAtEnd(t, cancel, r)
		if !fromJournal {
			for i := range 30 {
				r.add(protocol.RunReport{ID: fmt.Sprintf("q%02d", i), TaskID: "t", Output: worst})
			}
		}
		testutil.Eventually(t, 20*time.Second, func() bool { return m.total() == 30 }, "all 30 runs delivered")
		m.mu.Lock()
		if m.tooLarge != 0 || len(m.sizes) < 3 {
			t.Errorf("journal %v: batches of %v bytes, %d over the master's bound %d; want every one within it",
				fromJournal, m.sizes, m.tooLarge, protocol.MaxRunsBatchBytes)
		}
		for id, n := range m.stored {
			if n != 1 {
				t.Errorf("run %s delivered %d times", id, n)
			}
		}
		m.mu.Unlock()
		if st := r.stats(); st.Dropped != 0 {
			t.Errorf("journal %v: %d runs dropped", fromJournal, st.Dropped)
		}
	}
}

// A busy master's 429 keeps the batch, and the next delivery waits for its
// Retry-After rather than the shorter backoff.
func TestReporterHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []time.Time
	post := func(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		if len(calls) == 1 {
			return protocol.RunsResponse{}, fmt.Errorf("worker: master at x %w",
				&protocol.StatusError{Status: http.StatusTooManyRequests, Msg: "busy", RetryAfter: 3 * time.Second})
		}
		return protocol.RunsResponse{Accepted: len(runs)}, nil
	}
	r := newReporter(t.TempDir(), 0, testutil.Discard(), post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	r.add(protocol.RunReport{ID: "a", TaskID: "t"})
	testutil.Eventually(t, 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 2 }, "delivered again")
	mu.Lock()
	gap := calls[1].Sub(calls[0])
	mu.Unlock()
	if gap < 2900*time.Millisecond {
		t.Errorf("delivered again %s after a 429 with Retry-After 3, want at least 3s", gap)
	}
	if st := r.stats(); st.Dropped != 0 || st.UnsentBytes != 0 {
		t.Errorf("after the retry: %+v, want nothing dropped or left", st)
	}
}
