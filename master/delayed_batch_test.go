package master_test

import (
	"fmt"
	"github.com/schedulemaster-go/schedulemaster/master"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store"
	"github.com/schedulemaster-go/schedulemaster/store/storetest"
)

// countCalls counts the worker API's run-once calls by path; with old, it
// answers the batch path as a worker of an earlier version would (404).
func countCalls(real http.Handler, single, batch *atomic.Int32, old bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case protocol.PathTaskRunOnce:
			single.Add(1)
		case protocol.PathTaskRunOnceBatch:
			batch.Add(1)
			if old {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"no such route"}`))
				return
			}
		}
		real.ServeHTTP(w, r)
	})
}

// Delayed tasks due together go to their worker in a few batch calls, each
// run once; a worker too old for batches gets them one by one.
func TestDelayedDueTogetherAreSentInBatches(t *testing.T) {
	t.Parallel()
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("old_worker=%v", old), func(t *testing.T) {
			t.Parallel()
			s := storetest.OpenSQLite(t)
			e := newEnv(t, s, fastDelayed)
			url := e.serveMaster()
			ws := reportingWorkers(e, url, "w1")
			var single, batch atomic.Int32
			ws["w1"].Serve(countCalls(ws["w1"].Router(), &single, &batch, old))
			if err := e.m.Start(e.ctx); err != nil {
				t.Fatal(err)
			}
			sink := newCallbackSink(t)
			const n = 300
			// Created in one batch (one transaction): the tasks appear due
			// together however long a loaded machine takes to make them,
			// where 300 creations one by one could straddle their time.
			at := time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339Nano)
			ins := make([]master.DelayedInput, n)
			for i := range n {
				in := delayedIn(sink.URL+"/cb", "")
				in.Delay, in.At, in.ContentKey = nil, at, fmt.Sprintf("k-%d", i)
				ins[i] = in
			}
			res, err := e.m.Delayed().CreateDelayedBatch(e.ctx, ins, "admin")
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, n)
			for i, r := range res {
				if !r.OK || !r.Created {
					t.Fatalf("delayed task %d of the batch: %+v", i, r)
				}
				ids[i] = r.ID
			}
			for _, id := range ids {
				waitDelayed(t, e.m, id, store.DelayedSuccess, 30*time.Second)
			}
			if got := len(sink.got("/cb")); got != n {
				t.Fatalf("%d callbacks for %d tasks", got, n)
			}
			switch {
			case !old && (batch.Load() == 0 || batch.Load() >= n/2 || single.Load() > n/10):
				t.Fatalf("%d batch calls and %d single calls for %d tasks due together: want a few batches", batch.Load(), single.Load(), n)
			case old && single.Load() != n:
				t.Fatalf("a worker without batches got %d single calls for %d tasks", single.Load(), n)
			}
		})
	}
}
