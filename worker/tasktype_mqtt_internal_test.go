package worker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
	"github.com/schedulemaster-go/schedulemaster/store/storetest/testutil"
)

// newMQTTRedisRunner is newLiveRunner with the executors of a worker started
// with --allow-types types.
func newMQTTRedisRunner(t *testing.T, types ...string) (*runner, *reportSink) {
	t.Helper()
	log := testutil.Discard()
	execs, err := newRegistry(http.DefaultClient, false, types, log)
	if err != nil {
		t.Fatal(err)
	}
	sink := &reportSink{}
	ctx, cancel := context.WithCancel(context.Background())
	rep := newReporter("", 0, log, sink.post)
	go rep.run(ctx)
	r := &runner{
		log: log, node: func() string { return "w1" }, limit: newLimiter(100), execs: execs,
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

func mqttSpec(id, addr string) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: "t", Type: protocol.TaskMQTT, Retries: 2,
		Timeout:  protocol.Duration(5 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		MQTT:     &protocol.MQTTSpec{Connection: "broker", Topic: "smtest/worker", Payload: "x", QoS: 1}},
		Connection: &protocol.ConnectionSpec{Name: "broker", Kind: protocol.ConnMQTT, Address: addr, User: "u", Secret: "mqtt-w0rker-secret",
			Options: map[string]string{"protocol_version": "3.1.1"}},
		Executors: 1}
}

func TestMQTTTaskToADownBrokerIsTriedThreeTimesThroughTheRunner(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	r, sink := newMQTTRedisRunner(t, protocol.TaskMQTT)
	r.runOnce(mqttSpec("m1", addr), nil)
	var runs []protocol.RunReport
	waitFor(t, "three failed attempts", func() bool {
		runs = runs[:0]
		for _, rep := range sink.all() {
			if rep.TaskID == "m1" && rep.Result != protocol.ResultRunning {
				runs = append(runs, rep)
			}
		}
		return len(runs) == 3
	})
	for i, rep := range runs {
		if rep.Result != protocol.ResultFailed || rep.Attempt != i+1 || !strings.Contains(rep.Output, "connect to "+addr+": connection refused") {
			t.Fatalf("attempt %d = %d %s %q, want failed: connection refused", i+1, rep.Attempt, rep.Result, rep.Output)
		}
		if strings.Contains(rep.Output, "mqtt-w0rker-secret") {
			t.Fatalf("attempt %d shows the secret: %q", i+1, rep.Output)
		}
	}
}

func TestMQTTTaskIsRefusedByAWorkerThatDoesNotAllowIt(t *testing.T) {
	t.Parallel()
	r, _ := newMQTTRedisRunner(t) // no --allow-types
	_, err := r.startSpec(mqttSpec("m2", "127.0.0.1:1883"))
	if !errors.Is(err, ErrTypeRefused) || !strings.Contains(err.Error(), "--allow-types mqtt") {
		t.Fatalf("startSpec = %v, want ErrTypeRefused naming --allow-types mqtt", err)
	}
	if err := typeRefused(r.registry(), protocol.TaskMQTT); !errors.Is(err, ErrTypeRefused) {
		t.Fatalf("typeRefused = %v", err)
	}
}
