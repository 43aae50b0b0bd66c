package worker

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/schedulemaster-go/schedulemaster/protocol"
)

func redisSpec(id, addr string) protocol.TaskSpec {
	return protocol.TaskSpec{TaskDef: protocol.TaskDef{ID: id, Title: "t", Type: protocol.TaskRedis, Retries: 2,
		Timeout:  protocol.Duration(5 * time.Second),
		Schedule: protocol.Schedule{Kind: protocol.ScheduleInterval, Every: protocol.Duration(time.Hour)},
		Redis:    &protocol.RedisSpec{Connection: "cache", Command: protocol.RedisLPush, Key: "smtest:worker", Payload: "x"}},
		Connection: &protocol.ConnectionSpec{Name: "cache", Kind: protocol.ConnRedis, Address: addr, User: "u", Secret: "redis-w0rker-secret"},
		Executors:  1}
}

func TestRedisTaskToADownServerIsTriedThreeTimesThroughTheRunner(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	r, sink := newMQTTRedisRunner(t, protocol.TaskRedis)
	r.runOnce(redisSpec("r1", addr), nil)
	var runs []protocol.RunReport
	waitFor(t, "three failed attempts", func() bool {
		runs = runs[:0]
		for _, rep := range sink.all() {
			if rep.TaskID == "r1" && rep.Result != protocol.ResultRunning {
				runs = append(runs, rep)
			}
		}
		return len(runs) == 3
	})
	for i, rep := range runs {
		if rep.Result != protocol.ResultFailed || rep.Attempt != i+1 || !strings.Contains(rep.Output, "LPUSH smtest:worker: connect to "+addr+": connection refused") {
			t.Fatalf("attempt %d = %d %s %q, want failed: connection refused", i+1, rep.Attempt, rep.Result, rep.Output)
		}
		if strings.Contains(rep.Output, "redis-w0rker-secret") {
			t.Fatalf("attempt %d shows the secret: %q", i+1, rep.Output)
		}
	}
}

func TestRedisTaskIsRefusedByAWorkerThatDoesNotAllowIt(t *testing.T) {
	t.Parallel()
	r, _ := newMQTTRedisRunner(t, protocol.TaskMQTT) // mqtt allowed, redis not
	_, err := r.startSpec(redisSpec("r2", "127.0.0.1:6379"))
	if !errors.Is(err, ErrTypeRefused) || !strings.Contains(err.Error(), "--allow-types redis") {
		t.Fatalf("startSpec = %v, want ErrTypeRefused naming --allow-types redis", err)
	}
}
