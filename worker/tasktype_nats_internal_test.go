package worker

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
	"github.com/schedulemaster-go/schedulemaster/worker/executor/executortest"
)

// A nats task through the real runner: a worker allowed the type runs it
// and retries it (two retries to a down server: three failed attempts,
// each with the precise reason); a worker not allowed it refuses it.
func TestTaskTypeNATSRetriedByTheRunnerAndRefusedWhenNotAllowed(t *testing.T) {
	t.Parallel()
	log := testutil.Discard()
	execs, err := newRegistry(http.DefaultClient, false, []string{protocol.TaskNATS}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = execs.Close() })
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, log, sink.post)
	go rep.run(ctx)
	t.Cleanup(func() {
		cancel()
		<-rep.done
	})
	r := &runner{
		log: log, node: func() string { return "w1" }, limit: newLimiter(100), execs: execs,
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 20 * time.Millisecond,
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return true, nil },
	}
	addr := executortest.ClosedPort(t)
	secret := "nats-token-shh"
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "tnats", Title: "t", Type: protocol.TaskNATS, Retries: 2,
		Timeout:  protocol.Duration(5 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		NATS:     &protocol.NATSSpec{Connection: "bus", Subject: "orders.close", Payload: "x"}}, Executors: 1,
		Connection: &protocol.ConnectionSpec{Name: "bus", Kind: protocol.ConnNATS, Address: addr, Secret: secret}}
	r.runOnce(spec, nil)
	var finals []protocol.RunReport
	waitFor(t, "three failed attempts", func() bool {
		finals = byResult(sink.all(), protocol.ResultFailed)
		return len(finals) >= 3
	})
	for i, f := range finals {
		if f.TaskID != "tnats" || f.Attempt != i+1 || f.Output != "connect to "+addr+": connection refused" {
			t.Fatalf("attempt %d: %+v", i+1, f)
		}
		if strings.Contains(f.Output, secret) {
			t.Fatalf("attempt %d shows the secret: %q", i+1, f.Output)
		}
	}
	time.Sleep(100 * time.Millisecond) // longer than the next backoff would be: no fourth attempt
	if n := len(byResult(sink.all(), protocol.ResultFailed)); n != 3 {
		t.Fatalf("%d failed attempts, want 3 (Retries: 2)", n)
	}

	// A runner whose worker was not allowed nats refuses the task.
	plain := &runner{log: log, node: func() string { return "w1" }, limit: newLimiter(10), http: http.DefaultClient,
		jobs: map[string]*taskJob{}, ctx: ctx, reports: rep}
	if _, err := plain.startSpec(spec); !errors.Is(err, ErrTypeRefused) || !strings.Contains(err.Error(), "--allow-types nats") {
		t.Fatalf("startSpec of a nats task on a worker without it = %v, want ErrTypeRefused", err)
	}
}
