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

// newGRPCRunner is newLiveRunner's real runner and reporter with the
// executors of allow (grpc or none).
func newGRPCRunner(t *testing.T, allow []string) (*runner, *reportSink) {
	t.Helper()
	execs, err := newRegistry(http.DefaultClient, false, allow, testutil.Discard())
	if err != nil {
		t.Fatal(err)
	}
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, testutil.Discard(), sink.post)
	go rep.run(ctx)
	r := &runner{
		log: testutil.Discard(), node: func() string { return "w1" }, limit: newLimiter(100), execs: execs,
		http: http.DefaultClient, jobs: map[string]*taskJob{}, ctx: ctx, reports: rep, backoff: 50 * time.Millisecond,
		claim: func(context.Context, string, time.Time, runID) (bool, error) { return true, nil },
	}
	done := make(chan struct{})
	go r.noticeLoop(ctx, done)
	t.Cleanup(func() {
		cancel()
		<-done
		<-rep.done
		_ = execs.Close()
	})
	return r, sink
}

func TestTaskTypeGRPCDownServerIsRetriedThroughTheRunner(t *testing.T) {
	t.Parallel()
	const secret = "grpc-s3cret-token"
	spec := protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: "g1", Title: "grpc", Type: protocol.TaskGRPC, Retries: 2,
		Timeout:  protocol.Duration(5 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		GRPC:     &protocol.GRPCSpec{Connection: "g", Method: "grpc.health.v1.Health/Check", Request: `{}`}}, Executors: 1,
		Connection: &protocol.ConnectionSpec{Name: "g", Kind: protocol.ConnGRPC, Address: executortest.ClosedPort(t), Secret: secret}}

	refusing, _ := newGRPCRunner(t, nil)
	if _, err := refusing.startSpec(spec); !errors.Is(err, ErrTypeRefused) || !strings.Contains(err.Error(), "--allow-types grpc") {
		t.Fatalf("a runner without grpc allowed: startSpec = %v, want ErrTypeRefused", err)
	}

	r, sink := newGRPCRunner(t, []string{protocol.TaskGRPC})
	start := time.Now()
	r.runOnce(spec, nil)
	var finals []protocol.RunReport
	waitFor(t, "3 failed attempts", func() bool {
		finals = finals[:0]
		for _, rep := range sink.all() {
			if rep.TaskID == "g1" && rep.Result != protocol.ResultRunning {
				finals = append(finals, rep)
			}
		}
		return len(finals) >= 3
	})
	if len(finals) != 3 {
		t.Fatalf("%d attempts reported, want 3 (Retries: 2)", len(finals))
	}
	for i, rep := range finals {
		if rep.Result != protocol.ResultFailed || rep.Attempt != i+1 || !strings.Contains(rep.Output, "code = Unavailable") || !strings.Contains(rep.Output, "connection refused") {
			t.Fatalf("attempt %d: %s attempt=%d %q, want failed: Unavailable, connection refused", i+1, rep.Result, rep.Attempt, rep.Output)
		}
		if strings.Contains(rep.Output, secret) {
			t.Fatalf("attempt %d shows the secret: %q", i+1, rep.Output)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("3 attempts against a down server took %s", d)
	}
}
