package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// TestReportsToAMasterOfAnEarlierVersion: a master of an earlier version
// knows no task versions and refuses a batch that carries them as
// unreadable (as its strict decoder does); the worker sends the same runs
// without them, so none is dropped, and a batch without versions goes as
// it is.
func TestReportsToAMasterOfAnEarlierVersion(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	stored, refused := map[string]int{}, 0
	post := func(_ context.Context, runs []protocol.RunReport) (protocol.RunsResponse, error) {
		body, err := json.Marshal(protocol.RunsRequest{Runs: runs})
		if err != nil {
			return protocol.RunsResponse{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		if bytes.Contains(body, []byte(`"task_version"`)) {
			refused++
			return protocol.RunsResponse{}, fmt.Errorf("%w: %w", errBatchRefused,
				&protocol.StatusError{Status: http.StatusBadRequest, Msg: `invalid JSON body: json: unknown field "task_version"`})
		}
		for _, r := range runs {
			stored[r.ID]++
		}
		return protocol.RunsResponse{Accepted: len(runs)}, nil
	}
	r := newReporter(t.TempDir(), 0, testutil.Discard(), post)
	ctx, cancel := context.WithCancel(context.Background())
	go r.run(ctx)
	waitAtEnd(t, cancel, r)
	start := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	for i := range 20 {
		r.add(protocol.RunReport{ID: fmt.Sprintf("r%02d", i), TaskID: "t", Node: "w", StartedAt: start, Attempt: 1,
			Result: protocol.ResultSuccess, TaskVersion: i % 3})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(stored)
		mu.Unlock()
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 runs delivered; dropped %d", n, r.stats().Dropped)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range stored {
		if n != 1 {
			t.Errorf("run %s delivered %d times", id, n)
		}
	}
	if refused == 0 {
		t.Fatal("no batch carried a task version: the fallback was not tried")
	}
	if d := r.stats().Dropped; d != 0 {
		t.Fatalf("%d runs dropped", d)
	}
}
